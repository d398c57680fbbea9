//! proptest: `referee perf`'s reading of any bytes never panics — random
//! mixtures of the tokens its parsers look for (iteration markers, timing
//! keys, numbers in every spelling, rank prefixes, NaN norms, MLLOG
//! fragments, Megatron argument lines), invalid UTF-8 and line ends — and
//! every problem it reports names a line of the file.

use proptest::prelude::*;
use referee_submission::perf::{self, PerfRequest};

const TOKENS: &[&str] = &[
    "iteration",
    " iteration ",
    "iteration 35/50",
    "iteration  99999999999999999999/1",
    "/",
    " | ",
    "train_step_timing in s",
    ": ",
    "=",
    "elapsed time per iteration (ms):",
    "TFLOPS_per_GPU:",
    "throughput per GPU (TFLOP/s/GPU):",
    "MODEL_TFLOP/s/GPU",
    "TFLOP/s/GPU",
    "global batch size:",
    "global_batch_size:",
    "grad norm: nan",
    "grad_norm",
    "nan",
    "inf",
    "-1",
    "0",
    "1e309",
    "2.5e-1",
    "12",
    "44",
    "abc",
    "0: ",
    "[rank3]:",
    "[1,2]<stdout>:",
    "[default0]:",
    ":::MLLOG ",
    "{\"key\": \"throughput\", \"value\": {\"samples_per_second\": 1}, \"time_ms\": 1, \"metadata\": {\"window_start_step\": 9, \"window_end_step\": 3}}",
    "  seq_length ....... ",
    "using world size: ",
    "\n",
    "\r\n",
    "\r",
    "\u{ff}",
    " ",
    "..",
];

fn text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..4),
        ],
        0..200,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_bytes_are_read_without_panic(bytes in text()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.out");
        std::fs::write(&path, &bytes).unwrap();
        let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
        let req = PerfRequest {
            paths: vec![path.clone()],
            window: Some((0, u64::MAX, perf::fields::Source::Flag)),
            ..Default::default()
        };
        let rep = perf::perf(&req).unwrap();
        prop_assert_eq!(rep.rows.len(), 1);
        for p in &rep.rows[0].problems {
            prop_assert!(p.line >= 1 && p.line <= lines, "{} of {}", p.line, lines);
        }
        let default = perf::perf(&PerfRequest { window: None, ..req }).unwrap();
        let mut out = Vec::new();
        referee_submission::perf::report::write_csv(&default, &mut out).unwrap();
        perf::html::html(&default).unwrap();
    }
}
