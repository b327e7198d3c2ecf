"use strict";
// Copy buttons beside each remediation command; where the clipboard is
// refused (a page opened from disk), the command is selected instead.
document.querySelectorAll("button.copy").forEach(function (button) {
  button.addEventListener("click", function () {
    var text = button.getAttribute("data-copy") || "";
    var select = function () {
      var range = document.createRange();
      range.selectNodeContents(button.previousElementSibling);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = "selected";
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () {
        button.textContent = "copied";
      }, select);
    } else {
      select();
    }
  });
});
document.documentElement.setAttribute("data-ready", "yes");
