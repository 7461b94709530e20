//! cargo fuzz target: `ferrocoll::fuzz`'s `handles`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (_, f) = ferrocoll::fuzz::TARGETS
        .iter()
        .find(|t| t.0 == "handles")
        .expect("a known target");
    f(data);
});
