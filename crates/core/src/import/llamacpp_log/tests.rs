use super::*;

#[test]
fn reads_the_prefix_of_every_tag() {
    let (t, level, m) =
        parse_line("1.23.123.531 I slot launch_slot_: id  1 | task 12 | processing task, is_child = 0").unwrap();
    assert_eq!(t, Some(83_123_531));
    assert_eq!(level, 'I');
    assert_eq!(m.tag, Tag::Slot(1, 12));
    assert_eq!(m.text, "processing task, is_child = 0");
    let (_, _, m) = parse_line("0.00.100.000 D srv        decode: n_batch (effective) = 2048, off = 0").unwrap();
    assert_eq!(m.tag, Tag::Srv);
    assert_eq!(m.text, "n_batch (effective) = 2048, off = 0");
    assert!(parse_line("llama_model_loader: - kv   0: general.architecture str = gemma3").is_none());
    assert!(parse_line("1.2.3.4 I slot x").is_none(), "a time of the wrong widths");
}

#[test]
fn strips_colour_codes() {
    let coloured = "\x1b[34m0.00.001.000\x1b[0m \x1b[32mI \x1b[0mslot      release: id  0 | task 3 | stop processing: n_tokens = 9, truncated = 0";
    let plain = strip_ansi(coloured);
    let (t, _, m) = parse_line(&plain).unwrap();
    assert_eq!(t, Some(1_000));
    assert_eq!(m.tag, Tag::Slot(0, 3));
}

/// A task's three steps at `-lv 5` with speculative decoding, written from llama-server's format strings
/// (`tools/server/server-context.cpp`: `generate_draft` :490, `add accepted tokens` :3977, `accepted %d/%d` :4003,
/// `draft acceptance` :645): the prefill emits token 1; verify step 1 drafts 4 and accepts 2 (tokens 2 and 3)
/// then its own token (4); verify step 2 drafts 4 and accepts all (5 to 8) then its own (9), and the task stops
/// inside it, so that step has no `accepted 4/4` line and only the task's line counts it.
const SPECULATIVE: &str = "\
0.00.100.000 I slot launch_slot_: id  0 | task 5 | processing task, is_child = 0
0.00.100.010 D que    start_loop: update slots
0.00.100.020 I slot   operator(): id  0 | task 5 | new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 4
0.00.100.030 I slot   operator(): id  0 | task 5 | cached n_tokens = 0, memory_seq_rm [0, end)
0.00.100.040 I slot init_sampler: id  0 | task 5 | init sampler, took 0.01 ms, tokens: text = 4, total = 4
0.00.100.050 D srv        decode: n_batch (effective) = 2048, off = 0
0.00.100.060 D que  yield_to_que: yielding to queue
0.00.110.000 D que  yield_to_que: done yielding to queue
0.00.110.010 D slot process_toke: id  0 | task 5 | n_gen = 1, n_remaining = 63, next token:   603 ' the'
0.00.110.100 D que    start_loop: update slots
0.00.110.110 D que  yield_to_que: yielding to queue
0.00.114.000 D que  yield_to_que: done yielding to queue
0.00.114.010 D slot handle_last_: id  0 | task 5 | generate_draft: id=603, #tokens=5, #draft=4, pos_next=5
0.00.114.020 D srv        decode: n_batch (effective) = 2048, off = 0
0.00.114.030 D que  yield_to_que: yielding to queue
0.00.140.000 D que  yield_to_que: done yielding to queue
0.00.140.100 D slot   operator(): id  0 | task 5 | add accepted tokens: sampled=4321, ids.size=3, n_draft=4
0.00.140.150 D slot process_toke: id  0 | task 5 | n_gen = 2, n_remaining = 62, next token:   100 ' a'
0.00.140.190 D slot process_toke: id  0 | task 5 | n_gen = 3, n_remaining = 61, next token:   101 ' b'
0.00.140.230 D slot process_toke: id  0 | task 5 | n_gen = 4, n_remaining = 60, next token:  4321 ' c'
0.00.140.260 D slot   operator(): id  0 | task 5 | accepted 2/4 draft tokens, new n_tokens = 7
0.00.140.300 D que    start_loop: update slots
0.00.140.310 D que  yield_to_que: yielding to queue
0.00.143.000 D que  yield_to_que: done yielding to queue
0.00.143.010 D slot handle_last_: id  0 | task 5 | generate_draft: id=4321, #tokens=8, #draft=4, pos_next=8
0.00.143.020 D srv        decode: n_batch (effective) = 2048, off = 0
0.00.143.030 D que  yield_to_que: yielding to queue
0.00.160.000 D que  yield_to_que: done yielding to queue
0.00.160.100 D slot   operator(): id  0 | task 5 | add accepted tokens: sampled=7, ids.size=5, n_draft=4
0.00.160.110 D slot process_toke: id  0 | task 5 | n_gen = 5, n_remaining = 59, next token:   200 ' d'
0.00.160.120 D slot process_toke: id  0 | task 5 | n_gen = 6, n_remaining = 58, next token:   201 ' e'
0.00.160.130 D slot process_toke: id  0 | task 5 | n_gen = 7, n_remaining = 57, next token:   202 ' f'
0.00.160.140 D slot process_toke: id  0 | task 5 | n_gen = 8, n_remaining = 56, next token:   203 ' g'
0.00.160.150 I slot process_toke: id  0 | task 5 | stopped by EOS
0.00.160.160 D slot process_toke: id  0 | task 5 | n_gen = 9, n_remaining = 55, next token:     1 ''
0.00.160.300 I slot print_timing: id  0 | task 5 | draft acceptance = 0.75000 (    6 accepted /     8 generated), mean len =  4.00
0.00.160.400 I slot      release: id  0 | task 5 | stop processing: n_tokens = 12, truncated = 0
";

#[test]
fn a_speculative_task_reads_as_its_verify_steps_with_each_tokens_role() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llama-server.log");
    std::fs::write(&path, SPECULATIVE).unwrap();
    let t = crate::load::load(&path, &Progress::default()).unwrap().trace;
    // The task's totals are its end line's: 6 of 8 (steps 1 and 2: 2 of 4 and 4 of 4).
    assert_eq!(t.requests.spec_drafted_tokens.at(0), Some(8));
    assert_eq!(t.requests.spec_accepted_tokens.at(0), Some(6));
    // Three steps: the prefill's, then the two verify steps with their drafts and accepted drafts.
    let it = &t.iterations;
    assert_eq!(it.len(), 3);
    assert_eq!(it.spec_drafted_tokens, [Some(0), Some(4), Some(4)]);
    assert_eq!(it.spec_accepted_tokens, [Some(0), Some(2), Some(4)]);
    // A verify step computes the slot's token and its 4 drafts; it begins with its drafting (0.110.110 and
    // 0.140.310, ms 110.11 and 140.31), not at its decode line.
    assert_eq!(it.num_decode_tokens.at(1), Some(5));
    assert_eq!(it.start_ns[1] - it.start_ns[0], 10_060_000);
    assert_eq!(it.start_ns[2] - it.start_ns[0], 40_260_000);
    // Tokens 1..9: plain (the prefill's); draft, draft, bonus; draft x4, bonus.
    use crate::trace::SpecRole::{Bonus, Draft, Plain};
    assert_eq!(
        t.tokens.spec,
        [Plain, Draft, Draft, Bonus, Draft, Draft, Draft, Draft, Bonus]
    );
    // Each verify step's drafts on its first token only.
    let drafted: Vec<Option<u8>> = t.tokens.spec_drafted.iter().map(|&d| crate::trace::opt_u8(d)).collect();
    assert_eq!(drafted, [None, Some(4), None, None, Some(4), None, None, None, None]);
}

/// A second task after the speculative one: launched at 1 s, prefilled in step 3, decoding one token a step
/// (steps 4 and 5, at 1.02 s and 12 s), still running at the log's end.
const LONG_RUNNING: &str = "\
0.01.000.000 I slot launch_slot_: id  1 | task 6 | processing task, is_child = 0
0.01.000.010 D que    start_loop: update slots
0.01.000.020 I slot   operator(): id  1 | task 6 | new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 3
0.01.000.030 I slot   operator(): id  1 | task 6 | cached n_tokens = 0, memory_seq_rm [0, end)
0.01.000.040 I slot init_sampler: id  1 | task 6 | init sampler, took 0.01 ms, tokens: text = 3, total = 3
0.01.000.050 D srv        decode: n_batch (effective) = 2048, off = 0
0.01.010.000 D slot process_toke: id  1 | task 6 | n_gen = 1, n_remaining = 63, next token:   603 ' the'
0.01.020.000 D que    start_loop: update slots
0.01.020.010 D slot handle_last_: id  1 | task 6 | slot decode token, id=603, n_ctx = 4096, n_tokens = 4, truncated = 0
0.01.020.020 D srv        decode: n_batch (effective) = 2048, off = 0
0.01.030.000 D slot process_toke: id  1 | task 6 | n_gen = 2, n_remaining = 62, next token:   604 ' cat'
0.12.000.000 D que    start_loop: update slots
0.12.000.010 D slot handle_last_: id  1 | task 6 | slot decode token, id=604, n_ctx = 4096, n_tokens = 5, truncated = 0
0.12.000.020 D srv        decode: n_batch (effective) = 2048, off = 0
0.12.010.000 D slot process_toke: id  1 | task 6 | n_gen = 3, n_remaining = 61, next token:   605 ' sat'
";

#[test]
fn a_long_watch_forgets_what_ended_before_its_window_and_keeps_step_numbers() {
    let mut log = Incremental::default();
    for line in SPECULATIVE.lines().chain(LONG_RUNNING.lines()) {
        log.line(line.as_bytes(), 0);
    }
    assert_eq!(log.last_us(), Some(12_010_000));
    // Before 5 s: task 5 ended at 0.1604 s (forgotten); task 6 last spoke at 12.01 s (kept, with the steps it
    // was in: 3, 4 and 5). Steps 0 to 2 were task 5's alone and ended by 0.16 s: gone.
    assert_eq!(log.forget_before(5_000_000), 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llama-server.log");
    std::fs::write(&path, "").unwrap();
    let t = crate::import::llamacpp_live(&mut log, &path).0;
    assert_eq!(t.request_count(), 1);
    assert_eq!(t.request_id(0), "task-6");
    assert_eq!(t.token_count(), 3);
    assert_eq!(t.iterations.iteration, [3, 4, 5]);
    assert_eq!(t.tokens.iteration, [3, 4, 5]);
    // Its prefill stage still names step 3, its 3 prompt tokens.
    let prefill: Vec<(Option<i64>, Option<u32>)> = t
        .stages_of(0)
        .iter()
        .filter(|s| s.kind == crate::trace::StageKind::Prefill)
        .map(|s| (s.iteration, s.tokens))
        .collect();
    assert_eq!(prefill, [(Some(3), Some(3))]);
    // Forgetting again forgets nothing; past task 6's last word (12.01 s), everything.
    assert_eq!(log.forget_before(5_000_000), 0);
    assert_eq!(log.forget_before(12_010_001), 1);
}

#[test]
fn integers_after_their_keys() {
    assert_eq!(
        int_after(
            "new prompt, n_ctx_slot = 2048, n_keep = 0, task.n_tokens = 812",
            "task.n_tokens ="
        ),
        Some(812)
    );
    assert_eq!(
        int_after("n_gen = 25, n_remaining = -1, next token", "n_remaining ="),
        Some(-1)
    );
    assert_eq!(int_after("nothing here", "n_gen ="), None);
}
