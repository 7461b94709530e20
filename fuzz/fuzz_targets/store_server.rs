//! cargo fuzz target: `ferrocoll::fuzz`'s `store_server`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (_, f) = ferrocoll::fuzz::TARGETS
        .iter()
        .find(|t| t.0 == "store_server")
        .expect("a known target");
    f(data);
});
