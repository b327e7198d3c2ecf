//! A request's generation that began and went silent: the `generating`
//! stage (catalogs/startup.toml's lollms rows).

use crate::rules::Category;

fn stalled(text: &str) -> Option<crate::rules::Finding> {
    crate::testing::analyze_paste(text)
        .diagnosis
        .findings
        .into_iter()
        .find(|f| f.rule == super::META.id)
}

/// ParisNeo/lollms-webui#474 (fixtures/real/968), verbatim: a chat
/// message's generation announced, then only the web UI's own requests.
const LOLLMS: &str = "INFO:     ::1:50534 - \"GET /get_generation_status HTTP/1.1\" 200 OK\n\
Starting message generation by lollms\n\
Text generation requested by client: 6evnP_Mxv8L8I38YAAAJ\n\
Received message : ciao\n\
Started generation task\n\
INFO:     ::1:50534 - \"GET /user_infos/default_user.svg HTTP/1.1\" 404 Not Found\n\
warmup for generating up to 4022 tokens\n\
INFO:     ::1:50534 - \"GET /assets/Roboto-Regular-7277cfb8.ttf HTTP/1.1\" 304 Not Modified\n";

#[test]
fn a_generation_that_began_and_went_silent_is_a_hang() {
    let f = stalled(LOLLMS).expect("a finding");
    assert_eq!(f.category, Category::ServerHang);
    assert!(
        f.headline
            .contains("warmup for generating up to 4022 tokens"),
        "{}",
        f.headline
    );
    assert!(f.title.contains("generation"), "{}", f.title);
    // The web UI's own requests after it are not progress; the warm-up
    // line is what the finding cites.
    assert!(
        f.evidence.iter().any(|e| e.span.line == 7),
        "{:?}",
        f.evidence
    );
    // A generation cut from a paste says less than one someone gave up on.
    assert!(f.confidence < 0.5, "{}", f.confidence);
}

#[test]
fn the_generation_done_ends_it() {
    let done = format!("{LOLLMS}## Done Generation ##\n");
    assert!(stalled(&done).is_none());
    // Its error (the binding's exception, which lollms prints before its
    // `## Generation Error ##`; assembled) is its own story.
    let failed = format!(
        "{LOLLMS}requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', port=11434): Max retries exceeded with url: /api/generate\n## Generation Error ##\n"
    );
    assert!(stalled(&failed).is_none());
}

#[test]
fn a_server_ready_before_the_generation_does_not_end_it() {
    // A ready line before the request (the first generation done) says
    // nothing of the second one.
    let text = format!("## Done Generation ##\n{LOLLMS}");
    let f = stalled(&text).expect("a finding");
    assert!(f.title.contains("generation"), "{}", f.title);
}
