//! The two halves of one run made one trace: a client-side trace (a recording, a benchmark tool's export: the
//! tokens with their texts and candidates, on the client's clock) joined with the server's side of the same run
//! (spans, iteration logs, a server log: queue, prefill chunks, steps, on the server's clock).
//!
//! Requests are paired by id where the server kept the client's (vLLM's `X-Request-Id`, SGLang's `rid`), else by
//! what both sides saw of them: prompt length, output length, the first output token ids, and time. The clocks are
//! then aligned from the pairs: a server cannot receive a request before the client sent it, nor produce a token
//! after the client received it, so every pair bounds the offset from both sides; the offset is the middle of the
//! tightest bounds and its uncertainty half their width. The server's records are moved onto the client's clock,
//! and the gap between the two (network, detokenizer, proxy) becomes a figure of its own: a request's `sent_ns`
//! beside its server `arrival_ns`, a token's `received_ns` beside its server `emitted_ns`.
//!
//! What matches nothing is kept, on its own side. Halves that do not belong together (another run, another day,
//! one side empty) are refused with the reason.

use rustc_hash::FxHashMap as HashMap;

use crate::ingest::LoadError;
use crate::trace::report::{Place, Report};
use crate::trace::{Interner, Meta, NO_STR, NULL_I64, NULL_U32, Trace, TraceBuilder, opt_i64};

/// Whose clock a server-side trace's absolute times are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerClock {
    /// A wall clock (spans, dated logs): it can be compared with the client's, and an offset of hours means the
    /// halves are not of one run.
    Wall,
    /// Times placed on the wall clock by a guess (a log that counts from its process's start, anchored at the
    /// file's last change): any offset is possible, and only the pairs place it.
    Anchored,
}

impl ServerClock {
    /// The clock of a server-side trace, from its meta record (`clock = "anchored"`).
    pub fn of(trace: &Trace) -> Self {
        if trace.meta.clock.as_deref() == Some(ANCHORED) {
            ServerClock::Anchored
        } else {
            ServerClock::Wall
        }
    }
}

pub use crate::trace::CLOCK_ANCHORED as ANCHORED;
/// `meta.clock` of a joined trace: the server's records moved onto the client's clock.
pub const JOINED: &str = "joined";
/// `meta.clock` of a client-side trace.
pub const CLIENT: &str = "client";

/// A wall-clock offset beyond which two halves are taken to be of different runs (a log from another day).
const MAX_WALL_OFFSET_NS: i64 = 6 * 3_600 * 1_000_000_000;
/// How far apart in time (after the coarse offset) a pair matched by lengths alone may be.
const MIN_TIME_WINDOW_NS: i64 = 2_000_000_000;
/// How many leading output token ids are compared when both sides have them.
const COMPARED_IDS: usize = 16;

/// How the requests were paired, and the clocks' offset.
#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    /// (client row, server row) pairs.
    pub pairs: Vec<(u32, u32)>,
    /// How many pairs were matched by id.
    pub by_id: usize,
    /// Add to a server time to get the client's clock, ns.
    pub offset_ns: i64,
    /// Half the width of the band the pairs leave for the offset, ns; `None` when nothing bounds it.
    pub uncertainty_ns: Option<i64>,
    /// How far the tightest bounds cross (a negative band), ns: the clocks drift, or a side's times are coarse.
    pub conflict_ns: i64,
}

/// What a request looks like from either side, for pairing.
struct Shape {
    /// Client: send time; server: arrival.
    at_ns: i64,
    input: Option<u32>,
    output: u32,
    /// The first output token ids, when every one of them is known.
    ids: Vec<u32>,
}

fn shape(t: &Trace, r: u32) -> Shape {
    let tokens = t.tokens_of(r);
    let ids: Vec<u32> = tokens
        .clone()
        .take(COMPARED_IDS)
        .map(|k| t.tokens.token_id[k])
        .take_while(|&id| id != NULL_U32)
        .collect();
    Shape {
        at_ns: t.requests.arrival_ns[r as usize],
        input: t.requests.input_tokens.at(r as usize),
        output: t.output_tokens(r),
        ids,
    }
}

/// True when two requests could be the same one: prompt lengths equal (or within one: a BOS counted on one side
/// only), output lengths within one (an end-of-sequence token one side does not stream), and the leading output
/// token ids equal where both have them.
fn compatible(c: &Shape, s: &Shape) -> bool {
    let near = |a: u32, b: u32| a.abs_diff(b) <= 1;
    if let (Some(a), Some(b)) = (c.input, s.input)
        && !near(a, b)
    {
        return false;
    }
    if !near(c.output, s.output) {
        return false;
    }
    c.ids.iter().zip(&s.ids).all(|(a, b)| a == b)
}

/// Strong evidence: both sides have at least four leading ids and they agree.
fn same_tokens(c: &Shape, s: &Shape) -> bool {
    c.ids.len().min(s.ids.len()) >= 4 && compatible(c, s)
}

/// The server ids a client id may stand in: the id itself, or the id between `-` boundaries inside the server's
/// (vLLM answers `chatcmpl-<id>` and its engine adds `-<random>`).
fn id_candidates(server_id: &str) -> impl Iterator<Item = &str> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(server_id.match_indices('-').map(|(i, _)| i))
        .collect();
    let ends: Vec<usize> = server_id
        .match_indices('-')
        .map(|(i, _)| i)
        .chain(std::iter::once(server_id.len()))
        .collect();
    let mut out = Vec::new();
    for (k, &a) in bounds.iter().enumerate() {
        let start = if k == 0 { a } else { a + 1 };
        for &e in ends.iter().filter(|&&e| e > start) {
            out.push(&server_id[start..e]);
        }
    }
    out.into_iter()
}

/// Pairs the requests of the two halves and aligns their clocks.
///
/// # Errors
/// The halves do not look like one run: a side is empty, too few requests pair, or (on wall clocks) the offset is
/// hours.
pub fn pair(client: &Trace, server: &Trace, names: (&str, &str)) -> Result<Join, LoadError> {
    let refuse = |why: String| LoadError::Join {
        client: names.0.to_owned(),
        server: names.1.to_owned(),
        why,
    };
    let (nc, ns) = (client.requests.len(), server.requests.len());
    if nc == 0 {
        return Err(refuse(format!("{} has no requests", names.0)));
    }
    if ns == 0 && server.iterations.is_empty() {
        return Err(refuse(format!("{} has no requests and no engine steps", names.1)));
    }
    let clock = ServerClock::of(server);
    if ns == 0 {
        // Steps only (an iteration log): nothing pairs, and the offset is whatever the clocks say.
        if clock == ServerClock::Anchored {
            return Err(refuse(format!(
                "{} has engine steps but no requests, and its times count from its process's start: nothing \
                 places them on the client's clock",
                names.1
            )));
        }
        return Ok(Join {
            pairs: Vec::new(),
            by_id: 0,
            offset_ns: 0,
            uncertainty_ns: None,
            conflict_ns: 0,
        });
    }
    let n32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let cs: Vec<Shape> = (0..n32(nc)).map(|r| shape(client, r)).collect();
    let ss: Vec<Shape> = (0..n32(ns)).map(|r| shape(server, r)).collect();
    let mut server_used = vec![false; ns];
    let mut client_used = vec![false; nc];
    let mut pairs = Vec::new();

    // 1. By id: the client's request id as the server kept it, the id the server answered with, or the W3C trace
    // id the client sent (`traceparent`) on the server's spans.
    let mut client_by_id: HashMap<&str, u32> = HashMap::default();
    for r in 0..n32(nc) {
        client_by_id.insert(client.request_id(r), r);
        for id in [
            client.requests.server_request_id[r as usize],
            client.requests.trace_id[r as usize],
        ] {
            if let Some(id) = client.labels.get(id).filter(|id| !id.is_empty()) {
                client_by_id.insert(id, r);
            }
        }
    }
    for s in 0..n32(ns) {
        let id = server.request_id(s);
        let trace_id = server
            .labels
            .get(server.requests.trace_id[s as usize])
            .filter(|id| !id.is_empty());
        let hit = client_by_id
            .get(id)
            .or_else(|| trace_id.and_then(|t| client_by_id.get(t)))
            .or_else(|| id_candidates(id).find_map(|cand| client_by_id.get(cand)));
        if let Some(&c) = hit
            && !client_used[c as usize]
            && compatible(&cs[c as usize], &ss[s as usize])
        {
            client_used[c as usize] = true;
            server_used[s as usize] = true;
            pairs.push((c, s));
        }
    }
    let by_id = pairs.len();

    // 2. A coarse offset: from the id pairs, else from the requests whose leading tokens pair them one to one,
    // else from the first arrivals.
    let mut anchors: Vec<i64> = pairs
        .iter()
        .map(|&(c, s)| cs[c as usize].at_ns - ss[s as usize].at_ns)
        .collect();
    if anchors.is_empty() {
        let mut by_ids: HashMap<&[u32], (Vec<u32>, Vec<u32>)> = HashMap::default();
        for (r, c) in cs.iter().enumerate().filter(|(_, c)| c.ids.len() >= 4) {
            by_ids.entry(&c.ids[..4]).or_default().0.push(n32(r));
        }
        for (r, s) in ss.iter().enumerate().filter(|(_, s)| s.ids.len() >= 4) {
            if let Some(e) = by_ids.get_mut(&s.ids[..4]) {
                e.1.push(n32(r));
            }
        }
        anchors = by_ids
            .values()
            .filter(|(c, s)| c.len() == 1 && s.len() == 1)
            .filter(|(c, s)| same_tokens(&cs[c[0] as usize], &ss[s[0] as usize]))
            .map(|(c, s)| cs[c[0] as usize].at_ns - ss[s[0] as usize].at_ns)
            .collect();
    }
    let coarse = if anchors.is_empty() {
        let first = |v: &[Shape]| v.iter().map(|x| x.at_ns).min().unwrap_or(0);
        first(&cs) - first(&ss)
    } else {
        anchors.sort_unstable();
        anchors[anchors.len() / 2]
    };
    let spread = if anchors.len() >= 3 {
        let mut dev: Vec<i64> = anchors.iter().map(|a| (a - coarse).abs()).collect();
        dev.sort_unstable();
        dev[dev.len() / 2] * 4
    } else {
        0
    };
    let window = MIN_TIME_WINDOW_NS.max(spread);

    // 3. The rest by shape and time: server requests bucketed by prompt length, sorted by arrival.
    let mut by_input: HashMap<Option<u32>, Vec<u32>> = HashMap::default();
    for s in (0..n32(ns)).filter(|&s| !server_used[s as usize]) {
        by_input.entry(ss[s as usize].input).or_default().push(s);
    }
    for list in by_input.values_mut() {
        list.sort_by_key(|&s| ss[s as usize].at_ns);
    }
    // A client request without a prompt length (a benchmark export) is searched among all of them, by time.
    let mut all: Vec<u32> = (0..n32(ns)).filter(|&s| !server_used[s as usize]).collect();
    all.sort_by_key(|&s| ss[s as usize].at_ns);
    let mut order: Vec<u32> = (0..n32(nc)).filter(|&c| !client_used[c as usize]).collect();
    order.sort_by_key(|&c| cs[c as usize].at_ns);
    for c in order {
        let shape_c = &cs[c as usize];
        let want = shape_c.at_ns - coarse;
        let lists: Vec<&[u32]> = match shape_c.input {
            Some(i) => [Some(i), Some(i.saturating_sub(1)), Some(i + 1), None]
                .iter()
                .filter_map(|key| by_input.get(key).map(Vec::as_slice))
                .collect(),
            None => vec![all.as_slice()],
        };
        let mut best: Option<(i64, u32)> = None;
        for list in lists {
            let from = list.partition_point(|&s| ss[s as usize].at_ns < want - window);
            for &s in &list[from..] {
                let at = ss[s as usize].at_ns;
                if at > want + window {
                    break;
                }
                if server_used[s as usize] || !compatible(shape_c, &ss[s as usize]) {
                    continue;
                }
                let d = (at - want).abs();
                if best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, s));
                }
            }
        }
        if let Some((_, s)) = best {
            server_used[s as usize] = true;
            client_used[c as usize] = true;
            pairs.push((c, s));
        }
    }

    let smaller = nc.min(ns);
    if pairs.len() * 2 < smaller.max(1) {
        return Err(refuse(format!(
            "only {} of {} client requests and {} server requests pair up (by id, or by prompt and output length \
             within {:.1} s); they look like different runs",
            pairs.len(),
            nc,
            ns,
            ns_secs(window)
        )));
    }
    let (offset_ns, uncertainty_ns, conflict_ns) = offset(client, server, &pairs);
    if clock == ServerClock::Wall && offset_ns.abs() > MAX_WALL_OFFSET_NS {
        return Err(refuse(format!(
            "their clocks are {} apart; a client and a server of one run are seconds apart at most. If the \
             server's clock was really that far off, shift its file's times first",
            human_duration(offset_ns)
        )));
    }
    pairs.sort_unstable();
    Ok(Join {
        pairs,
        by_id,
        offset_ns,
        uncertainty_ns,
        conflict_ns,
    })
}

/// The clocks' offset from the pairs: (offset, half the band's width, how far the bounds cross).
///
/// Each pair bounds it from below (the server received the request after the client sent it:
/// `offset >= sent - arrival`) and from above (the client received each token after the server produced it:
/// `offset <= received - emitted`, the first token through `first_token_ns` when the server has no token times).
fn offset(client: &Trace, server: &Trace, pairs: &[(u32, u32)]) -> (i64, Option<i64>, i64) {
    let mut low = i64::MIN;
    let mut high = i64::MAX;
    for &(c, s) in pairs {
        low = low.max(client.requests.arrival_ns[c as usize] - server.requests.arrival_ns[s as usize]);
        let client_tokens = client.tokens_of(c);
        let server_tokens = server.tokens_of(s);
        let mut bounded = false;
        for (kc, ks) in client_tokens.zip(server_tokens) {
            if client.tokens.index[kc] == server.tokens.index[ks] {
                high = high.min(client.tokens.emitted_ns[kc] - server.tokens.emitted_ns[ks]);
                bounded = true;
            }
        }
        if !bounded && let (Some(a), Some(b)) = (client.first_token_ns(c), server.first_token_ns(s)) {
            high = high.min(a - b);
        }
    }
    match (low, high) {
        (i64::MIN, i64::MAX) => (0, None, 0),
        (l, i64::MAX) => (l, None, 0),
        (i64::MIN, h) => (h, None, 0),
        (l, h) if l <= h => (l + (h - l) / 2, Some((h - l) / 2), 0),
        (l, h) => (h + (l - h) / 2, Some(0), l - h),
    }
}

fn ns_secs(ns: i64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let s = ns as f64 / 1e9;
    s
}

/// "3 days", "7.2 hours", "14 minutes".
fn human_duration(ns: i64) -> String {
    let s = ns_secs(ns.abs());
    if s >= 2.0 * 86_400.0 {
        format!("{:.0} days", s / 86_400.0)
    } else if s >= 3_600.0 {
        format!("{:.1} hours", s / 3_600.0)
    } else {
        format!("{:.0} minutes", s / 60.0)
    }
}

/// "+12.345 ms", "-1.2 s".
fn signed_ms(ns: i64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let ms = ns as f64 / 1e6;
    if ms.abs() >= 10_000.0 {
        format!("{:+.3} s", ms / 1e3)
    } else {
        format!("{ms:+.3} ms")
    }
}

/// Maps every id of an interner into `into`, by id.
fn remap(from: &Interner, into: &mut Interner) -> Vec<u32> {
    (0..u32::try_from(from.len()).unwrap_or(u32::MAX))
        .map(|i| into.intern(from.str_or_empty(i)))
        .collect()
}

fn mapped(map: &[u32], id: u32) -> u32 {
    if id == NO_STR {
        NO_STR
    } else {
        map.get(id as usize).copied().unwrap_or(NO_STR)
    }
}

fn shifted(t: Option<i64>, by: i64) -> Option<i64> {
    t.map(|t| t.saturating_add(by))
}

/// Adds the explicit stages of the server's request `s` under the request label `label`, moved by `off`.
fn add_stages(server: &Trace, s: u32, label: u32, off: i64, b: &mut TraceBuilder) {
    for k in server.explicit_stages_of(s) {
        let mut st = server.stages.row(k);
        st.request = label;
        st.start_ns = st.start_ns.saturating_add(off);
        st.end_ns = st.end_ns.saturating_add(off);
        st.iter_row = None;
        b.add_stage(st, Place::default());
    }
}

/// The joined trace: the client's requests and tokens (texts, candidates, arrival times) with the server's times,
/// stages, steps and each token's step; unpaired requests of either side kept on their own. `report` is the two
/// halves' load reports, absorbed into one; the join's notes are added to it.
///
/// The client's trace is patched in place and its columns moved into the builder (its tokens and candidates, most
/// of a trace, are not copied), then the server's records are added: `docs/PERFORMANCE.md`, "Both halves".
pub fn build(client: Trace, server: &Trace, join: &Join, mut report: Report) -> (Trace, Report) {
    let off = join.offset_ns;
    let (client_requests, client_only) = (client.requests.len(), client.requests.len() - join.pairs.len());
    let mut t = client;
    let server_labels = remap(&server.labels, &mut t.labels);
    let server_texts = remap(&server.texts, &mut t.texts);
    let mut server_paired = vec![false; server.requests.len()];

    let mut meta = Meta {
        present: true,
        clock: Some(JOINED.to_owned()),
        ..t.meta.clone()
    };
    meta.engine = meta.engine.or_else(|| server.meta.engine.clone());
    meta.engine_version = meta.engine_version.or_else(|| server.meta.engine_version.clone());
    meta.model = meta.model.or_else(|| server.meta.model.clone());
    let mut eos = meta.eos_token_ids.take().unwrap_or_default();
    eos.extend(server.meta.eos_token_ids.iter().flatten().copied());
    eos.sort_unstable();
    eos.dedup();
    meta.eos_token_ids = (!eos.is_empty()).then_some(eos);
    t.meta = meta;

    // Each paired request, in place: the server's times, source and counts; its tokens' server times and steps.
    let mut extra: Vec<(u32, usize)> = Vec::new();
    for &(c, s) in &join.pairs {
        server_paired[s as usize] = true;
        let (ci, srv) = (c as usize, server.requests.row(s as usize));
        let q = &mut t.requests;
        q.sent_ns.set(ci, Some(q.arrival_ns[ci]));
        q.arrival_ns[ci] = srv.arrival_ns.saturating_add(off);
        q.scheduled_ns.set(ci, shifted(srv.scheduled_ns, off));
        q.first_token_ns.set(
            ci,
            shifted(srv.first_token_ns.or_else(|| server.first_token_ns(s)), off),
        );
        q.finished_ns
            .set(ci, shifted(srv.finished_ns.or_else(|| server.finish_ns(s)), off));
        q.source[ci] = mapped(&server_labels, srv.source);
        q.input_tokens.set(ci, q.input_tokens.at(ci).or(srv.input_tokens));
        q.cached_tokens.set(ci, srv.cached_tokens.or(q.cached_tokens.at(ci)));
        q.output_tokens.set(ci, q.output_tokens.at(ci).or(srv.output_tokens));
        q.num_preemptions
            .set(ci, srv.num_preemptions.or(q.num_preemptions.at(ci)));
        q.spec_drafted_tokens
            .set(ci, srv.spec_drafted_tokens.or(q.spec_drafted_tokens.at(ci)));
        q.spec_accepted_tokens
            .set(ci, srv.spec_accepted_tokens.or(q.spec_accepted_tokens.at(ci)));
        // Both sides' tokens are in index order: walked together.
        let theirs = server.tokens_of(s);
        let mut k = theirs.start;
        let mut last_index = None;
        for mine in t.tokens_of(c) {
            let index = t.tokens.index[mine];
            while k < theirs.end && server.tokens.index[k] < index {
                k += 1;
            }
            last_index = Some(index);
            if k < theirs.end && server.tokens.index[k] == index {
                let tk = &mut t.tokens;
                tk.received_ns[mine] = tk.emitted_ns[mine];
                tk.emitted_ns[mine] = server.tokens.emitted_ns[k].saturating_add(off);
                tk.iteration[mine] = server.tokens.iteration[k];
                // What the token was in its verify step is the server's to say.
                if server.tokens.spec[k] != crate::trace::SpecRole::Unknown {
                    tk.spec[mine] = server.tokens.spec[k];
                    tk.spec_drafted[mine] = server.tokens.spec_drafted[k];
                }
                if tk.token_id[mine] == NULL_U32 {
                    tk.token_id[mine] = server.tokens.token_id[k];
                }
            }
        }
        // Tokens the server produced that the client never received (a chat stream leaves out its EOS).
        extra.extend(
            theirs
                .filter(|&k| last_index.is_none_or(|i| server.tokens.index[k] > i))
                .map(|k| (t.requests.id[ci], k)),
        );
    }
    let stages_of_pairs: Vec<(u32, u32)> = join
        .pairs
        .iter()
        .map(|&(c, s)| (t.requests.id[c as usize], s))
        .collect();
    // The server's requests no client request paired with, and whether a client request has their id.
    let unpaired: Vec<(u32, bool)> = (0..u32::try_from(server.requests.len()).unwrap_or(u32::MAX))
        .filter(|&s| !server_paired[s as usize])
        .map(|s| (s, t.request_row(server.request_id(s)).is_some()))
        .collect();

    let mut b = TraceBuilder::from_trace(t);
    let place = Place::default();
    for i in 0..server.iterations.len() {
        let mut it = server.iterations.row(i);
        it.source = mapped(&server_labels, it.source);
        it.start_ns = it.start_ns.saturating_add(off);
        it.end_ns = it.end_ns.saturating_add(off);
        b.add_iteration(it, place);
    }
    for (label, s) in stages_of_pairs {
        add_stages(server, s, label, off, &mut b);
    }
    for (label, k) in extra {
        b.add_token(
            server_token(server, k, label, &server_texts, off),
            std::iter::empty(),
            place,
        );
    }

    // The server's requests no client request paired with, on their own.
    let server_only = unpaired.len();
    for (s, taken) in unpaired {
        let mut row = server.requests.row(s as usize);
        row.map_labels(|id| mapped(&server_labels, id));
        if taken {
            row.id = b.labels.intern(&format!("server:{}", server.request_id(s)));
        }
        let label = row.id;
        row.arrival_ns = row.arrival_ns.saturating_add(off);
        row.scheduled_ns = shifted(row.scheduled_ns, off);
        row.first_token_ns = shifted(row.first_token_ns, off);
        row.finished_ns = shifted(row.finished_ns, off);
        b.add_request(row, place);
        add_stages(server, s, label, off, &mut b);
        for k in server.tokens_of(s) {
            b.add_token(
                server_token(server, k, label, &server_texts, off),
                std::iter::empty(),
                place,
            );
        }
    }

    let by_shape = join.pairs.len() - join.by_id;
    let mut note = format!(
        "Joined {} of {} client requests with the server's: {} by id, {} by prompt and output length and time",
        join.pairs.len(),
        client_requests,
        join.by_id,
        by_shape
    );
    if client_only > 0 {
        note.push_str(&format!("; {client_only} kept on the client's side only"));
    }
    if server_only > 0 {
        note.push_str(&format!(
            "; {server_only} server requests no client request matched, kept on their own"
        ));
    }
    note.push('.');
    report.notes.push(note);
    let band = match join.uncertainty_ns {
        Some(u) => format!(" ± {}", signed_ms(u).trim_start_matches('+')),
        None => " (bounded on one side only)".to_owned(),
    };
    let mut clocks = format!(
        "The server's times are moved by {}{band} onto the client's clock: the offset where every paired request \
         reached the server after the client sent it and every token left the server before the client received it.",
        signed_ms(off)
    );
    if join.conflict_ns > 0 {
        clocks.push_str(&format!(
            " The pairs disagree by {}: the clocks drift over the run, or one side's times are coarse.",
            signed_ms(join.conflict_ns).trim_start_matches('+')
        ));
    }
    if join.pairs.is_empty() {
        "The server's side has steps but no requests: its times are taken as they are, on a wall clock assumed to be \
         the client's."
            .clone_into(&mut clocks);
    }
    report.notes.push(clocks);
    let (trace, built) = b.finish();
    // The halves' own warnings are found again on the joined records, with the join's on top.
    report.warnings = built.warnings;
    report.warnings_by_concern = built.warnings_by_concern;
    (trace, report)
}

/// Server token row `k` as a token of request `label` of the joined trace, moved by `off`.
fn server_token(server: &Trace, k: usize, label: u32, texts: &[u32], off: i64) -> crate::trace::Token {
    let mut tok = server.tokens.row(k);
    tok.request = label;
    tok.text = mapped(texts, tok.text);
    tok.iter_row = NULL_U32;
    tok.emitted_ns = tok.emitted_ns.saturating_add(off);
    tok.received_ns = NULL_I64;
    tok
}

/// Client-side figures in a joined trace: true when a request has both halves.
pub fn is_joined(trace: &Trace, request: u32) -> bool {
    trace.requests.sent_ns.get(request as usize).is_some()
}

/// A token's delivery: from the server producing it to the client receiving it, ns (a joined trace only).
pub fn delivery_ns(trace: &Trace, token: usize) -> Option<i64> {
    let received = opt_i64(*trace.tokens.received_ns.get(token)?)?;
    Some(received - trace.tokens.emitted_ns[token])
}

#[cfg(test)]
mod tests;
