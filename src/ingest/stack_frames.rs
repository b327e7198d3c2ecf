//! Stack frames of languages other than Python's, read by their grammar.
//!
//! A Go program's goroutine dump and a .NET exception's trace are machine
//! output with a fixed layout, printed by their runtimes under a message the
//! catalogs read (`panic: …`, `System.Exception: …`). Their lines make no
//! fact; they are recognised so that `rootcause inputs` counts them as read
//! rather than unrecognised. Each layout is a small `nom` grammar, taken from
//! the runtime that prints it; a line must match it whole.

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_till, take_till1, take_until, take_while1};
use nom::character::complete::{char, digit1, hex_digit1, one_of, space0};
use nom::combinator::{all_consuming, opt, peek, recognize, verify};
use nom::multi::{many0, many1};

use crate::model::CallGraphLine;
use crate::source::Span;

type Parsed<'a, T> = nom::IResult<&'a str, T>;

/// A line of a Go program's goroutine dump, as the runtime prints it after
/// `panic: …` (`runtime/traceback.go`): `goroutine N [state]:`; per frame
/// the function with its arguments as words in hex (`main.start(0x10d7b20?,
/// {0xc0001ce460, 0x9, 0xe})`, `(...)` when elided), then a tab and
/// `file.go:LINE +0xPC`; and `created by pkg.fn in goroutine N` (batch P's
/// 1043, https://github.com/NVIDIA/k8s-device-plugin/issues/338).
pub(super) fn is_go_stack_line(text: &str) -> bool {
    all_consuming(alt((goroutine_header, go_file_place, go_call)))
        .parse(text.trim_end())
        .is_ok()
}

/// `goroutine 1 [running]:`, `goroutine 7 [chan receive, 2 minutes]:`.
fn goroutine_header(i: &str) -> Parsed<'_, &str> {
    recognize((
        tag("goroutine "),
        digit1,
        tag(" ["),
        take_till(|c| c == ']'),
        tag("]:"),
    ))
    .parse(i)
}

/// `\t/build/cmd/nvidia-device-plugin/main.go:247 +0x4bd`: an absolute
/// path to a `.go` file, its line, and the program counter's offset (absent
/// for an inlined frame).
fn go_file_place(i: &str) -> Parsed<'_, &str> {
    let go_file = |p: &&str| {
        p.starts_with('/')
            && p.rsplit_once(".go:").is_some_and(|(_, line)| {
                !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
            })
    };
    recognize((
        take_while1(|c| c == ' ' || c == '\t'),
        verify(take_till1(|c| c == ' '), go_file),
        opt((tag(" +0x"), hex_digit1)),
    ))
    .parse(i)
}

/// A frame's call, or the goroutine's creator: `main.(*migStrategyNone).
/// GetPlugins(0xc00011c278)`, `github.com/urfave/cli/v2.(*App).Run(...)`,
/// `created by main.main in goroutine 1` (Go before 1.21 names the creator
/// without `in goroutine N`).
fn go_call(i: &str) -> Parsed<'_, &str> {
    let (rest, (created, name, args, _)) = (
        opt(tag("created by ")),
        go_function,
        opt(go_arguments),
        opt((tag(" in goroutine "), digit1)),
    )
        .parse(i)?;
    // No arguments is Go's too (`main.main()`), but also a Python call at a
    // prompt (`torch.cuda.memory_allocated()`, fixtures/real 886): only a
    // Go-shaped name then, `main.`, a package path with a slash, or a
    // method's `(*Type)`. A frame's call always has its parentheses; only a
    // creator's name stands bare.
    let go_named = name.starts_with("main.") || name.contains('/') || name.contains(".(*");
    let fits = match args {
        Some("") => go_named,
        Some(_) => true,
        None => created.is_some(),
    };
    if fits {
        Ok((rest, name))
    } else {
        Err(nom::Err::Error(nom::error::Error::new(
            i,
            nom::error::ErrorKind::Verify,
        )))
    }
}

/// A function's full name: a package path, then dot-separated names, a
/// method's receiver in parentheses (`(*App)`) among them. It starts with a
/// lower-case letter (a package) and holds a dot.
fn go_function(i: &str) -> Parsed<'_, &str> {
    let name_char = |c: char| c.is_alphanumeric() || "_./-·%[]".contains(c);
    let receiver = recognize((
        char('('),
        opt(char('*')),
        take_while1(name_char),
        char(')'),
        peek(char('.')),
    ));
    verify(
        recognize(many1(alt((take_while1(name_char), receiver)))),
        |n: &str| n.starts_with(|c: char| c.is_ascii_lowercase()) && n.contains('.'),
    )
    .parse(i)
}

/// The arguments, each a word in hex (`?` when it may be stale), `...` for
/// those elided, braces around a value's words; the text between the
/// parentheses is returned.
fn go_arguments(i: &str) -> Parsed<'_, &str> {
    let word = recognize((tag("0x"), hex_digit1, opt(char('?'))));
    let piece = alt((word, tag("..."), recognize(one_of("{}, "))));
    let (rest, (_, args, _)) = (char('('), recognize(many0(piece)), char(')')).parse(i)?;
    Ok((rest, args))
}

/// A frame of a .NET exception's stack trace, as `Exception.ToString()`
/// prints it under the `Namespace.Type: message` line: indented `at `, the
/// method's full name with its parameter list, and where the build kept
/// symbols ` in <file>:line N` (`   at
/// NHM.DeviceMonitoring.DeviceMonitorNVIDIA.ExecNvmlProcedure[T](T
/// failReturn, String tag, Func`1 nvmlExecFun)`, batch O's 1016,
/// https://github.com/trexminer/T-Rex/issues/331). Java's `at
/// pkg.Class.method(File.java:12)` is not one: its parentheses hold a file
/// and line, not parameters.
pub(super) fn is_dotnet_frame(text: &str) -> bool {
    let source_place = (tag(" in "), take_until(":line "), tag(":line "), digit1);
    all_consuming((
        take_while1(|c| c == ' ' || c == '\t'),
        tag("at "),
        dotnet_method,
        char('('),
        dotnet_parameters,
        char(')'),
        opt(source_place),
        space0,
    ))
    .parse(text)
    .is_ok()
}

/// `Namespace.Type.Method`, `Type.<Outer>b__17_0`, `Type.Method[T]`: a
/// dotted name starting with a capital (.NET's naming) or a compiler's `<`.
fn dotnet_method(i: &str) -> Parsed<'_, &str> {
    verify(take_till1(|c| c == '(' || c == ' '), |n: &str| {
        n.contains('.') && n.starts_with(|c: char| c.is_ascii_uppercase() || c == '<')
    })
    .parse(i)
}

/// The parameter list (`String[] args`); never Java's place in its
/// parentheses (`Foo.java:12`, `Native Method`, `Unknown Source`).
fn dotnet_parameters(i: &str) -> Parsed<'_, &str> {
    verify(take_till(|c| c == ')'), |p: &str| {
        !(p.contains(".java:")
            || p.contains(".kt:")
            || matches!(p, "Native Method" | "Unknown Source"))
    })
    .parse(i)
}

/// A native frame as TurboMind prints it under `stack trace:` before it
/// aborts (batch S's 1201, https://github.com/InternLM/lmdeploy/issues/1813,
/// read from the real lines; the printer was not found upstream): the
/// shared object (a path that may be cut on the left, `.../x.so`), ` : `,
/// the demangled symbol or `()` when it has none, and `+0xOFFSET`.
pub(super) fn is_native_frame(text: &str) -> bool {
    let shared_object =
        |p: &&str| p.contains(".so") || p.ends_with(".dylib") || p.ends_with(".dll");
    let parsed: Parsed<'_, _> = all_consuming((
        take_while1(|c| c == ' ' || c == '\t'),
        verify(take_till1(|c| c == ' '), shared_object),
        tag(" : "),
        take_until("+0x"),
        tag("+0x"),
        hex_digit1,
        space0,
    ))
    .parse(text);
    parsed.is_ok()
}

/// A line of the call graph macOS's `sample` (and Activity Monitor's
/// "Sample Process") prints under `Call graph:`: a thread's head, `1740
/// Thread_96991399   DispatchQueue_1: com.apple.main-thread  (serial)`,
/// or a frame under it, the tree drawn with `+`, `!`, `:` and `|` before
/// the samples it was seen in, the symbol, its image, the offset and the
/// address: `+ 1740 start  (in dyld) + 6992  [0x183553e00]` (batch S's
/// 1195, https://github.com/ddalcu/mlx-serve/issues/186). Its depth is the
/// column the count stands at.
pub(super) fn sample_call_graph_line(text: &str, span: Span) -> Option<CallGraphLine> {
    let body = text.trim_end();
    let indent = body.len() - body.trim_start().len();
    if indent == 0 {
        return None;
    }
    let tree = body[indent..]
        .find(|c: char| !matches!(c, '+' | '!' | ':' | '|' | ' '))
        .map(|i| indent + i)?;
    let rest = &body[tree..];
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let samples: u64 = rest[..digits].parse().ok()?;
    let what = rest[digits..].strip_prefix(' ')?;
    let thread = tree == indent && what.starts_with("Thread_");
    let place = what.split_once("  (in ");
    let frame = tree > indent && place.is_some() && (what.ends_with(']') || what.contains("  [0x"));
    if !(thread || frame) {
        return None;
    }
    let (text, image) = match place.filter(|_| frame) {
        Some((symbol, rest)) => (
            symbol.trim().to_owned(),
            rest.split_once(')').map(|(image, _)| image.to_owned()),
        ),
        None => (what.trim().to_owned(), None),
    };
    Some(CallGraphLine {
        depth: tree,
        samples,
        thread,
        text,
        image,
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Go goroutine dump's lines (batch P's 1043,
    /// https://github.com/NVIDIA/k8s-device-plugin/issues/338, verbatim) are
    /// read; a Python call, a sentence and a Python frame's file are not.
    #[test]
    fn go_goroutine_dumps() {
        for line in [
            "goroutine 1 [running]:",
            "goroutine 35 [chan receive, 2 minutes]:",
            "main.(*migStrategyNone).GetPlugins(0xc00011c278)",
            "        /build/cmd/nvidia-device-plugin/mig-strategy.go:57 +0x1a5",
            "main.startPlugins(0xc0000e3c58?, {0xc0001ce460, 0x9, 0xe}, 0x9?)",
            "github.com/urfave/cli/v2.(*App).Run(...)",
            "        /build/vendor/github.com/urfave/cli/v2/app.go:224",
            "main.main()",
            "created by main.main in goroutine 1",
            "created by net/http.(*Server).Serve",
        ] {
            assert!(is_go_stack_line(line), "{line}");
        }
        for other in [
            "    scheduler.step()",
            "goroutine leak suspected in the server",
            "  File \"/opt/x.py\", line 3, in f",
            "model.load(path, strict=False)",
            // fixtures/real/886: a call typed at Python's prompt.
            "torch.cuda.memory_allocated()",
            "np.zeros(10)",
            "torch.cuda.empty_cache",
            "        /build/cmd/main.go:57 and more",
            "        /build/cmd/main.py:57",
            "Main.run(0x1)",
        ] {
            assert!(!is_go_stack_line(other), "{other}");
        }
    }

    /// .NET's frames (batch O's 1016, https://github.com/trexminer/T-Rex/issues/331;
    /// the `in …:line N` form as .NET prints it with symbols) are read;
    /// Java's and a person's `at home (…)` are not.
    #[test]
    fn dotnet_stack_frames() {
        for frame in [
            "   at NHM.DeviceMonitoring.DeviceMonitorNVIDIA.<NHM.DeviceMonitoring.IGetFanSpeedPercentage.GetFanSpeedPercentage>b__17_0()",
            "   at NHM.DeviceMonitoring.DeviceMonitorNVIDIA.ExecNvmlProcedure[T](T failReturn, String tag, Func`1 nvmlExecFun)",
            "   at Program.Main(String[] args) in C:\\src\\Program.cs:line 12",
            "   at Program.Main(String[] args)  ",
        ] {
            assert!(is_dotnet_frame(frame), "{frame}");
        }
        for other in [
            "\tat com.example.Foo.bar(Foo.java:12)",
            "\tat java.lang.Thread.run(Unknown Source)",
            "\tat Foo.Bar.run(Native Method)",
            "at NHM.Device.Run()",
            "   at home (with the kids)",
            "   at Program.Main(String[] args) and then it stopped",
        ] {
            assert!(!is_dotnet_frame(other), "{other}");
        }
    }

    /// TurboMind's native frames (batch S's 1201, verbatim) are read; a
    /// sentence with a colon and Go's file place are not.
    #[test]
    fn turbomind_native_frames() {
        for frame in [
            "  .../lmdeploy/lmdeploy/lib/_turbomind.cpython-310-x86_64-linux-gnu.so : turbomind::LlamaBatch<__nv_bfloat16>::Finish(turbomind::GenerationState&)+0x16a",
            "  .../lmdeploy/lmdeploy/lib/_turbomind.cpython-310-x86_64-linux-gnu.so : ()+0x27da84",
            "  /lib64/libpthread.so.0 : ()+0x7ea5",
            "  /lib64/libc.so.6 : clone()+0x6d",
        ] {
            assert!(is_native_frame(frame), "{frame}");
        }
        for other in [
            "/lib64/libc.so.6 : clone()+0x6d",
            "  note : the model is loaded +0x1",
            "  /lib64/libc.so.6 : clone()+0x6d and then",
            "        /build/cmd/nvidia-device-plugin/mig-strategy.go:57 +0x1a5",
        ] {
            assert!(!is_native_frame(other), "{other}");
        }
    }

    /// `sample`'s call graph (batch S's 1195, verbatim): the thread heads
    /// and frames are read with their depth, count, symbol and image; a
    /// person's indented sentence and a bare number are not.
    #[test]
    fn macos_sample_call_graph() {
        let span = Span {
            source: crate::source::SourceId(0),
            line: 1,
        };
        let read = |line: &str| sample_call_graph_line(line, span);
        let head =
            read("    1740 Thread_96991399   DispatchQueue_1: com.apple.main-thread  (serial)")
                .expect("thread head");
        assert!(head.thread && head.samples == 1740 && head.depth == 4);
        assert!(head.text.contains("com.apple.main-thread"));
        let start = read("    + 1740 start  (in dyld) + 6992  [0x183553e00]").expect("frame");
        assert_eq!(
            (start.depth, start.text.as_str(), start.image.as_deref()),
            (6, "start", Some("dyld"))
        );
        let serve = read("    +       1740 server.serve  (in mlx-serve) + 2096  [0x1041ae9e4]")
            .expect("frame");
        assert_eq!(
            (serve.depth, serve.text.as_str(), serve.image.as_deref()),
            (12, "server.serve", Some("mlx-serve"))
        );
        assert!(read("    1740 Thread_96991400").is_some_and(|l| l.thread));
        for other in [
            "Call graph:",
            "    1740 samples were taken",
            "    + the server waits (in the loop)",
            "1740 Thread_96991399",
        ] {
            assert!(read(other).is_none(), "{other}");
        }
    }
}
