#![no_main]
//! Fuzz target: the frame peeler, line by line, as the stream runs it
//! (a peeler keeps state across lines: a line-number gutter).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut peeler = rootcause::ingest::Peeler::new();
    for line in text.lines() {
        let _ = peeler.peel(line);
    }
});
