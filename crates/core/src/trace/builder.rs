//! Builds a [`Trace`] from records in any order: resolves references between records (tokens and stages to their
//! request, to their iteration), sorts and indexes the tables, and reports what does not fit (duplicates, tokens of
//! unknown requests, index gaps, usage that disagrees with the token records).

use rayon::slice::ParallelSliceMut;
use rustc_hash::FxHashMap as HashMap;
use std::collections::hash_map::Entry;

use super::report::{Concern, Place, Problem, Rejection, Report, Warning};
use super::tables::{
    Candidate, Candidates, Iteration, Iterations, Reference, References, Request, Requests, Sample, Samples, Stage,
    StageKind, Stages, Token, Tokens,
};
use super::{CandidatesOnDisk, DEFAULT_SOURCE, Meta, NULL_I64, NULL_U32, Trace};
use crate::trace::strings::{Interner, NO_STR};

/// Accumulates validated records; [`TraceBuilder::finish`] turns them into a [`Trace`] and its [`Report`].
#[derive(Debug, Clone)]
pub struct TraceBuilder {
    /// Request ids, sources, labels: intern strings here before pushing rows that refer to them.
    pub labels: Interner,
    /// Token and candidate texts.
    pub texts: Interner,
    /// The load report; readers add malformed-record rejections to it directly.
    pub report: Report,
    /// A buffer for validating a token's candidates, reused from token to token.
    pub candidate_buffer: Vec<Candidate>,
    /// Set by a reader that left the candidates in these Parquet files: the trace then records where each
    /// request's token rows are, to read its candidates when asked.
    pub lazy_candidate_files: Option<Vec<std::path::PathBuf>>,
    /// Keep only this part of the records (`--from-time`, `--where`): the requests arriving in it whose labels
    /// match, with their records, and the steps starting in it on a matching source. A stage or token of a request
    /// not kept (or not read: a reader skips row groups outside the window) is dropped and counted in a note rather
    /// than rejected, and a step not kept is not missed.
    pub window: Option<super::window::Window>,
    /// The label id of the last request id interned by [`Self::intern_request_id`].
    last_request_id: Option<u32>,
    /// Text id of the last text seen for each token id, by [`Self::intern_token_text`] ([`NO_STR`]: none yet).
    text_by_token_id: Vec<u32>,
    meta: Option<(Meta, Place)>,
    requests: Requests,
    request_places: Vec<Place>,
    request_by_id: HashMap<u32, u32>,
    rejected_requests: HashMap<u32, Place>,
    iterations: Iterations,
    iteration_places: Vec<Place>,
    iteration_by_key: HashMap<(u32, i64), u32>,
    stages: Stages,
    stage_places: Vec<Place>,
    samples: Samples,
    tokens: Tokens,
    token_places: Vec<Place>,
    cand_start: Vec<u32>,
    candidates: Candidates,
    references: References,
    reference_places: Vec<Place>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        let mut labels = Interner::default();
        labels.intern(DEFAULT_SOURCE);
        Self {
            labels,
            texts: Interner::default(),
            report: Report::default(),
            candidate_buffer: Vec::new(),
            lazy_candidate_files: None,
            window: None,
            last_request_id: None,
            text_by_token_id: Vec::new(),
            meta: None,
            requests: Requests::default(),
            request_places: Vec::new(),
            request_by_id: HashMap::default(),
            rejected_requests: HashMap::default(),
            iterations: Iterations::default(),
            iteration_places: Vec::new(),
            iteration_by_key: HashMap::default(),
            stages: Stages::default(),
            stage_places: Vec::new(),
            samples: Samples::default(),
            tokens: Tokens::default(),
            token_places: Vec::new(),
            cand_start: vec![0],
            candidates: Candidates::default(),
            references: References::default(),
            reference_places: Vec::new(),
        }
    }
}

fn duplicate(place: Place, record: &'static str, field: &'static str, reason: String) -> Rejection {
    Rejection {
        place,
        problem: Problem::Duplicate,
        record: Some(record),
        field: Some(field),
        reason,
    }
}

impl TraceBuilder {
    /// Interns a request id. Records of one request usually follow each other, so the last one is checked first.
    pub fn intern_request_id(&mut self, id: &str) -> u32 {
        if let Some(last) = self.last_request_id
            && self.labels.get(last) == Some(id)
        {
            return last;
        }
        let label = self.labels.intern(id);
        self.last_request_id = Some(label);
        label
    }

    /// Interns the text of a token id. A vocabulary maps ids to texts, so the text last seen for this id is
    /// checked first (an array lookup and a short comparison instead of hashing).
    pub fn intern_token_text(&mut self, token_id: Option<u32>, text: &str) -> u32 {
        const MEMO_IDS: u32 = 1 << 20;
        let Some(slot) = token_id.filter(|&t| t < MEMO_IDS).map(|t| t as usize) else {
            return self.texts.intern(text);
        };
        if let Some(&known) = self.text_by_token_id.get(slot)
            && known != NO_STR
            && self.texts.get(known) == Some(text)
        {
            return known;
        }
        let id = self.texts.intern(text);
        if slot >= self.text_by_token_id.len() {
            self.text_by_token_id.resize(slot + 1, NO_STR);
        }
        self.text_by_token_id[slot] = id;
        id
    }

    /// The label id of the default source.
    pub fn default_source(&mut self) -> u32 {
        self.labels.intern(DEFAULT_SOURCE)
    }

    /// True once a meta record was added.
    pub fn has_meta(&self) -> bool {
        self.meta.is_some()
    }

    /// Adds the meta record. A second one in the same file is rejected; each file of a directory (the partitions
    /// of one trace) may carry its own, and the first file's wins.
    pub fn set_meta(&mut self, meta: Meta, place: Place) {
        if let Some((_, first)) = &self.meta {
            if first.file == place.file {
                let reason = format!(
                    "a second meta record; the first is at {}. Keep one",
                    self.report.describe(*first)
                );
                self.report.reject(duplicate(place, "meta", "kind", reason));
            }
            return;
        }
        self.meta = Some((meta, place));
    }

    /// Adds a request; `row.id` is the label id of its `request_id`. A repeated id is rejected.
    pub fn add_request(&mut self, row: Request, place: Place) {
        let next = u32::try_from(self.requests.len()).unwrap_or(u32::MAX);
        match self.request_by_id.entry(row.id) {
            Entry::Occupied(first) => {
                let first_place = self.request_places[*first.get() as usize];
                let reason = format!(
                    "request_id {:?} repeats the request at {}; request ids must be unique within a trace",
                    self.labels.str_or_empty(row.id),
                    self.report.describe(first_place)
                );
                self.report.reject(duplicate(place, "request", "request_id", reason));
            }
            Entry::Vacant(v) => {
                v.insert(next);
                self.requests.push(row);
                self.request_places.push(place);
            }
        }
    }

    /// Notes that the request record with this request id (label id) was rejected, so its stages and tokens are
    /// rejected with a reason that points at it.
    pub fn note_rejected_request(&mut self, id: u32, place: Place) {
        self.rejected_requests.entry(id).or_insert(place);
    }

    /// Adds an engine step; a repeated (source, iteration) is rejected.
    pub fn add_iteration(&mut self, row: Iteration, place: Place) {
        let next = u32::try_from(self.iterations.len()).unwrap_or(u32::MAX);
        match self.iteration_by_key.entry((row.source, row.iteration)) {
            Entry::Occupied(first) => {
                let first_place = self.iteration_places[*first.get() as usize];
                let reason = format!(
                    "iteration {} of source {:?} repeats the one at {}; step numbers must be unique per source",
                    row.iteration,
                    self.labels.str_or_empty(row.source),
                    self.report.describe(first_place)
                );
                self.report.reject(duplicate(place, "iteration", "iteration", reason));
            }
            Entry::Vacant(v) => {
                v.insert(next);
                self.iterations.push(row);
                self.iteration_places.push(place);
            }
        }
    }

    /// Adds a reading of an engine's counters. Two readings at one time are both kept: a log's times are often
    /// whole seconds, and two lines in one second are two readings.
    pub fn add_sample(&mut self, row: Sample) {
        self.samples.push(row);
    }

    /// Adds a stage; `row.request` is the label id of its `request_id`, resolved in [`Self::finish`].
    pub fn add_stage(&mut self, row: Stage, place: Place) {
        self.stages.push(row);
        self.stage_places.push(place);
    }

    /// Adds what a reference said of a token; `row.request` is the label id of its `request_id`, the token found by
    /// its `index` in [`Self::finish`].
    pub fn add_reference(&mut self, row: Reference, place: Place) {
        self.references.push(row);
        self.reference_places.push(place);
    }

    /// Adds a token and its candidates; `row.request` is the label id of its `request_id`.
    pub fn add_token(&mut self, row: Token, candidates: impl IntoIterator<Item = Candidate>, place: Place) {
        self.tokens.push(row);
        self.token_places.push(place);
        for c in candidates {
            self.candidates.push(c);
        }
        self.cand_start
            .push(u32::try_from(self.candidates.len()).unwrap_or(u32::MAX));
    }

    /// Appends what another builder collected from a later part of the same trace (a later Parquet row group, read
    /// on another thread), as if its records had been added here after this builder's own: first-wins duplicate
    /// True once a request has been added.
    pub fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The trace of what was added so far but the tokens: its requests, steps and stages, resolved and indexed as
    /// [`TraceBuilder::finish`] would (a preview while the rest is read). The builder is left as it is.
    pub fn skeleton(&self) -> Trace {
        let mut b = TraceBuilder {
            labels: self.labels.clone(),
            window: self.window.clone(),
            ..TraceBuilder::default()
        };
        if let Some((meta, place)) = &self.meta {
            b.set_meta(meta.clone(), *place);
        }
        for (i, &place) in self.request_places.iter().enumerate() {
            b.add_request(self.requests.row(i), place);
        }
        for (i, &place) in self.iteration_places.iter().enumerate() {
            b.add_iteration(self.iterations.row(i), place);
        }
        for (i, &place) in self.stage_places.iter().enumerate() {
            b.add_stage(self.stages.row(i), place);
        }
        b.samples = self.samples.clone();
        b.finish().0
    }

    /// Makes room for up to `tokens` more token records, so that the token columns are not copied as they grow (a
    /// reader that knows how many rows it will read calls it once). Room is only reserved, not touched: rows that
    /// turn out not to be tokens cost address space, not memory. An absurd count reserves nothing.
    pub fn reserve_tokens(&mut self, tokens: usize) {
        let _ = self.tokens.try_reserve(tokens)
            && self.token_places.try_reserve(tokens).is_ok()
            && self.cand_start.try_reserve(tokens).is_ok();
    }

    /// Where each request's token records are (file, first row, last row), from the places of the kept tokens
    /// (`order[k]` is the original index of token `k`; none: the tokens kept their order). A request whose tokens
    /// span files keeps its first file's.
    fn token_rows(&self, order: Option<&[u32]>) -> Vec<Option<(u32, u64, u64)>> {
        let mut rows: Vec<Option<(u32, u64, u64)>> = vec![None; self.requests.len()];
        for k in 0..self.tokens.len() {
            let old = order.map_or(k, |o| o[k] as usize);
            let place = self.token_places[old];
            let slot = &mut rows[self.tokens.request[k] as usize];
            match slot {
                None => *slot = Some((place.file, place.at, place.at)),
                Some((file, first, last)) if *file == place.file => {
                    *first = (*first).min(place.at);
                    *last = (*last).max(place.at);
                }
                Some(_) => {}
            }
        }
        rows
    }

    /// The rows of the tokens to keep, by (request, index): the first of repeated indices (the others rejected),
    /// none of the orphans (their request already [`NULL_U32`]).
    fn token_order(&mut self) -> Vec<u32> {
        let mut keyed: Vec<(u64, u32)> = (0..self.tokens.len())
            .filter(|&i| self.tokens.request[i] != NULL_U32)
            .map(|i| {
                let key = (u64::from(self.tokens.request[i]) << 32) | u64::from(self.tokens.index[i]);
                (key, i as u32)
            })
            .collect();
        keyed.par_sort_by_key(|&(k, _)| k); // stable: among repeats, the first in the file stays first
        let mut order: Vec<u32> = Vec::with_capacity(keyed.len());
        let mut prev_key = None;
        for &(key, i) in &keyed {
            if prev_key == Some(key) {
                let i = i as usize;
                let req = self.tokens.request[i];
                let reason = format!(
                    "token index {} of request {:?} appears twice; the first is kept",
                    self.tokens.index[i],
                    self.labels.str_or_empty(self.requests.id[req as usize])
                );
                self.report
                    .reject(duplicate(self.token_places[i], "token", "index", reason));
                continue;
            }
            prev_key = Some(key);
            order.push(i);
        }
        order
    }

    /// Why a stage or token naming request label `id` cannot be kept, when it cannot.
    /// Finds each reference's token (its request's, at its index), once the tokens are sorted and indexed by
    /// request (`token_start`); a reference of no token is rejected, a second one of a token too, and the rest
    /// sorted by token.
    fn resolve_references(
        &mut self,
        token_start: &[u32],
        row_of: &impl Fn(u32) -> Option<u32>,
        windowed: bool,
        not_read: &mut u64,
    ) {
        let mut keep: Vec<u32> = Vec::with_capacity(self.references.len());
        for i in 0..self.references.len() {
            let label = self.references.request[i];
            let place = self.reference_places[i];
            let Some(row) = row_of(label) else {
                if windowed {
                    *not_read += 1;
                } else {
                    let r = self.orphan(label, place, "reference");
                    self.report.reject(r);
                }
                continue;
            };
            let (a, b) = (token_start[row as usize], token_start[row as usize + 1]);
            let index = self.references.index[i];
            match self.tokens.index[a as usize..b as usize].binary_search(&index) {
                Ok(k) => {
                    self.references.request[i] = row;
                    self.references.token[i] = a + u32::try_from(k).unwrap_or(u32::MAX);
                    keep.push(u32::try_from(i).unwrap_or(u32::MAX));
                }
                Err(_) => self.report.reject(Rejection {
                    place,
                    problem: Problem::OutOfRange,
                    record: Some("reference"),
                    field: Some("index"),
                    reason: format!(
                        "request {:?} has no token at index {index} ({} tokens): a reference is of a generated token",
                        self.labels.str_or_empty(label),
                        b - a
                    ),
                }),
            }
        }
        keep.sort_by_key(|&i| (self.references.token[i as usize], i));
        let mut kept: Vec<u32> = Vec::with_capacity(keep.len());
        for &i in &keep {
            let token = self.references.token[i as usize];
            if kept.last().is_some_and(|&j| self.references.token[j as usize] == token) {
                let (request, index) = (self.references.request[i as usize], self.references.index[i as usize]);
                let id = self.labels.str_or_empty(self.requests.id[request as usize]).to_owned();
                self.report.reject(duplicate(
                    self.reference_places[i as usize],
                    "reference",
                    "index",
                    format!("a second reference of request {id:?}'s token {index}: the first is kept"),
                ));
                continue;
            }
            kept.push(i);
        }
        self.references.permute(&kept);
        self.reference_places = kept.iter().map(|&i| self.reference_places[i as usize]).collect();
    }

    fn orphan(&self, id: u32, place: Place, record: &'static str) -> Rejection {
        let name = self.labels.str_or_empty(id);
        match self.rejected_requests.get(&id) {
            Some(at) => Rejection {
                place,
                problem: Problem::RequestRejected,
                record: Some(record),
                field: Some("request_id"),
                reason: format!(
                    "the record of request {name:?} was rejected (at {}); fix it and this {record} loads too",
                    self.report.describe(*at)
                ),
            },
            None => Rejection {
                place,
                problem: Problem::UnknownRequest,
                record: Some(record),
                field: Some("request_id"),
                reason: format!(
                    "no request record has request_id {name:?}; add a kind=\"request\" record with its arrival_ns"
                ),
            },
        }
    }

    /// Resolves references, sorts, indexes and checks the records; returns the trace and the report.
    pub fn finish(mut self) -> (Trace, Report) {
        let mut trace = Trace::default();
        if let Some((meta, _)) = self.meta.take() {
            trace.meta = meta;
        }

        // The window's records: requests arriving in it whose labels match, steps starting in it.
        let window = self.window.take();
        let (read_requests, read_steps) = (self.requests.len(), self.iterations.len());
        fn label(labels: &Interner, id: u32) -> Option<&str> {
            labels.get(id)
        }
        let mut order: Vec<u32> = (0..u32::try_from(self.requests.len()).unwrap_or(u32::MAX)).collect();
        if let Some(w) = &window {
            let (r, l) = (&self.requests, &self.labels);
            order.retain(|&i| {
                let i = i as usize;
                w.contains(r.arrival_ns[i])
                    && w.allows_label("source", label(l, r.source[i]))
                    && w.allows_label("model", label(l, r.model[i]))
                    && w.allows_label("app_id", label(l, r.app_id[i]))
                    && w.allows_label("user_id", label(l, r.user_id[i]))
            });
        }
        // Requests by arrival, then id, so the model does not depend on record order.
        {
            let labels = &self.labels;
            let reqs = &self.requests;
            order.sort_by(|&a, &b| {
                let (a, b) = (a as usize, b as usize);
                reqs.arrival_ns[a]
                    .cmp(&reqs.arrival_ns[b])
                    .then_with(|| labels.str_or_empty(reqs.id[a]).cmp(labels.str_or_empty(reqs.id[b])))
            });
        }
        self.requests.permute(&order);
        let request_by_id = rows_by_id(&self.requests.id);
        // The same by label id, dense: looked up once per stage and token.
        let mut row_of_label = vec![NULL_U32; self.labels.len()];
        for (row, &id) in self.requests.id.iter().enumerate() {
            if let Some(slot) = row_of_label.get_mut(id as usize) {
                *slot = row as u32;
            }
        }
        let row_of = |label: u32| row_of_label.get(label as usize).copied().filter(|&r| r != NULL_U32);

        // Iterations by source, then start.
        let mut order: Vec<u32> = (0..u32::try_from(self.iterations.len()).unwrap_or(u32::MAX)).collect();
        if let Some(w) = &window {
            let (it, l) = (&self.iterations, &self.labels);
            order.retain(|&i| {
                w.contains(it.start_ns[i as usize]) && w.allows_label("source", label(l, it.source[i as usize]))
            });
        }
        {
            let it = &self.iterations;
            order.sort_by_key(|&i| (it.source[i as usize], it.start_ns[i as usize], it.iteration[i as usize]));
        }
        self.iterations.permute(&order);
        // The map of (source, iteration) to row the steps were added with (one entry a row), made to name the rows
        // sorted, in place: a second map of a million steps was the peak of a trace read without its tokens.
        let mut sorted_row = vec![NULL_U32; read_steps];
        for (k, &old) in order.iter().enumerate() {
            sorted_row[old as usize] = k as u32;
        }
        drop(order);
        let mut iteration_row = std::mem::take(&mut self.iteration_by_key);
        iteration_row.retain(|_, row| {
            *row = sorted_row.get(*row as usize).copied().unwrap_or(NULL_U32);
            *row != NULL_U32
        });
        drop(sorted_row);
        // Samples by source, then time (a stable sort: readings at one time keep their order).
        let mut order: Vec<u32> = (0..u32::try_from(self.samples.len()).unwrap_or(u32::MAX)).collect();
        if let Some(w) = &window {
            let (sa, l) = (&self.samples, &self.labels);
            order.retain(|&i| {
                w.contains(sa.time_ns[i as usize]) && w.allows_label("source", label(l, sa.source[i as usize]))
            });
        }
        {
            let sa = &self.samples;
            order.sort_by_key(|&i| (sa.source[i as usize], sa.time_ns[i as usize]));
        }
        self.samples.permute(&order);
        let mut source_iterations: Vec<(u32, std::ops::Range<u32>)> = Vec::new();
        for (i, &s) in self.iterations.source.iter().enumerate() {
            let i = i as u32;
            match source_iterations.last_mut() {
                Some((last, range)) if *last == s => range.end = i + 1,
                _ => source_iterations.push((s, i..i + 1)),
            }
        }
        // A window's records may name steps outside it.
        let has_iterations = !self.iterations.is_empty() && window.is_none();
        let mut not_read = 0u64;
        let mut missing_iterations: HashMap<u32, u64> = HashMap::default();

        // Stages: resolve the request and the iteration, drop orphans, sort by request then start.
        let mut keep: Vec<u32> = Vec::with_capacity(self.stages.len());
        for i in 0..self.stages.len() {
            let label = self.stages.request[i];
            let Some(row) = row_of(label) else {
                if window.is_some() {
                    not_read += 1;
                } else {
                    let r = self.orphan(label, self.stage_places[i], "stage");
                    self.report.reject(r);
                }
                continue;
            };
            self.stages.request[i] = row;
            if let Some(n) = self.stages.iteration[i] {
                // A disaggregated request's decode steps are its decode instance's.
                let source = match (self.stages.kind[i], self.requests.decode_source[row as usize]) {
                    (StageKind::Decode, d) if d != NO_STR => d,
                    _ => self.requests.source[row as usize],
                };
                self.stages.iter_row[i] = iteration_row.get(&(source, n)).copied();
                if has_iterations && self.stages.iter_row[i].is_none() {
                    *missing_iterations.entry(row).or_default() += 1;
                }
            }
            keep.push(i as u32);
        }
        {
            let st = &self.stages;
            keep.sort_by_key(|&i| (st.request[i as usize], st.start_ns[i as usize], st.end_ns[i as usize]));
        }
        self.stages.permute(&keep);
        trace.stage_start = starts_by_request(&self.stages.request, self.requests.len());

        // Tokens: resolve the request, sort by (request, index), reject repeated indices. Tokens already in that
        // order with no repeat and no orphan (what a writer of this format produces) keep their rows as they are.
        let mut in_order = true;
        let mut previous: Option<u64> = None;
        for i in 0..self.tokens.len() {
            let label = self.tokens.request[i];
            let Some(row) = row_of(label) else {
                if window.is_some() {
                    not_read += 1;
                } else {
                    let r = self.orphan(label, self.token_places[i], "token");
                    self.report.reject(r);
                }
                self.tokens.request[i] = NULL_U32;
                in_order = false;
                continue;
            };
            self.tokens.request[i] = row;
            let key = (u64::from(row) << 32) | u64::from(self.tokens.index[i]);
            in_order &= previous.is_none_or(|p| p < key);
            previous = Some(key);
        }
        let order = (!in_order).then(|| self.token_order());
        if let Some(order) = &order {
            let mut cands = Candidates::default();
            let mut starts = Vec::with_capacity(order.len() + 1);
            starts.push(0u32);
            for &t in order {
                let (a, b) = (
                    self.cand_start[t as usize] as usize,
                    self.cand_start[t as usize + 1] as usize,
                );
                for c in a..b {
                    cands.push(self.candidates.row(c));
                }
                starts.push(u32::try_from(cands.len()).unwrap_or(u32::MAX));
            }
            self.tokens.permute(order);
            self.candidates = cands;
            self.cand_start = starts;
        }
        if let Some(files) = self.lazy_candidate_files.take() {
            trace.candidates_on_disk = Some(CandidatesOnDisk {
                files,
                rows: self.token_rows(order.as_deref()),
            });
        }
        // A request's next token is mostly in the step after its last one's, the next row of the table: tried
        // before the map.
        let mut last_row = NULL_U32;
        for i in 0..self.tokens.len() {
            let n = self.tokens.iteration[i];
            if n != NULL_I64 {
                let r = self.tokens.request[i] as usize;
                let source = match self.requests.decode_source[r] {
                    NO_STR => self.requests.source[r],
                    d => d,
                };
                let it = &self.iterations;
                let next = [last_row.wrapping_add(1), last_row].into_iter().find(|&g| {
                    let g = g as usize;
                    g < it.len() && it.iteration[g] == n && it.source[g] == source
                });
                match next.or_else(|| iteration_row.get(&(source, n)).copied()) {
                    Some(row) => {
                        self.tokens.iter_row[i] = row;
                        last_row = row;
                    }
                    None if has_iterations => {
                        *missing_iterations.entry(self.tokens.request[i]).or_default() += 1;
                    }
                    None => {}
                }
            }
        }
        trace.token_start = starts_by_request(&self.tokens.request, self.requests.len());
        self.resolve_references(&trace.token_start, &row_of, window.is_some(), &mut not_read);

        trace.labels = self.labels;
        trace.texts = self.texts;
        trace.requests = self.requests;
        trace.iterations = self.iterations;
        trace.stages = self.stages;
        trace.samples = self.samples;
        trace.tokens = self.tokens;
        trace.candidates = self.candidates;
        trace.cand_start = self.cand_start;
        trace.references = self.references;
        trace.request_by_id = request_by_id;
        trace.source_iterations = source_iterations;

        let mut report = self.report;
        report.rejected.sort_by_key(|r| r.place);
        let m = &trace.meta;
        if m.version.is_some_and(|v| v != 1) || m.format.as_deref().is_some_and(|f| f != "tokenscope") {
            report.warn(Warning {
                concern: Concern::FormatVersion,
                request_id: None,
                message: format!(
                    "the meta record says format {:?} version {}; this build reads tokenscope version 1, and read \
                     the fields it knows",
                    m.format.as_deref().unwrap_or("?"),
                    m.version.map_or("?".to_owned(), |v| v.to_string())
                ),
            });
        }
        if let Some(w) = &window {
            report.notes.push(format!(
                "window {}: {} of {} requests and {} of {} steps read are in it; {} stage and token records of \
                 requests outside it were left out",
                w.describe(),
                trace.requests.len(),
                read_requests,
                trace.iterations.len(),
                read_steps,
                not_read
            ));
        }
        check_requests(&trace, &missing_iterations, &mut report);
        (trace, report)
    }
}

/// Each request's row by its id's label: the builder's map of requests added, made again once the rows moved.
fn rows_by_id(ids: &[u32]) -> HashMap<u32, u32> {
    ids.iter()
        .enumerate()
        .map(|(row, &id)| (id, u32::try_from(row).unwrap_or(u32::MAX)))
        .collect()
}

/// `starts[r]..starts[r + 1]` = rows of request `r` in a column sorted by request.
fn starts_by_request(request_of_row: &[u32], requests: usize) -> Vec<u32> {
    let mut starts = Vec::with_capacity(requests + 1);
    let mut row = 0usize;
    for r in 0..=requests {
        while row < request_of_row.len() && (request_of_row[row] as usize) < r {
            row += 1;
        }
        starts.push(u32::try_from(row).unwrap_or(u32::MAX));
    }
    starts
}

/// Per-request warnings: index gaps, tokens out of time order, usage disagreeing with token records, references to
/// iterations the trace lacks.
fn check_requests(trace: &Trace, missing_iterations: &HashMap<u32, u64>, report: &mut Report) {
    for r in 0..trace.request_count() as u32 {
        let tokens = trace.tokens_of(r);
        let id = || Some(trace.request_id(r).to_owned());
        if !tokens.is_empty() {
            let idx = &trace.tokens.index[tokens.clone()];
            let missing: u64 = idx.windows(2).map(|w| u64::from(w[1] - w[0] - 1)).sum::<u64>() + u64::from(idx[0]);
            if missing > 0 {
                let first_gap = if idx[0] > 0 {
                    0
                } else {
                    idx.windows(2).find(|w| w[1] > w[0] + 1).map_or(0, |w| w[0] + 1)
                };
                report.warn(Warning {
                    concern: Concern::IndexGap,
                    request_id: id(),
                    message: format!(
                        "request {:?}: {missing} token index(es) missing, the first at index {first_gap}; \
                         ITL across a gap spans several tokens",
                        trace.request_id(r)
                    ),
                });
            }
            let emitted = &trace.tokens.emitted_ns[tokens.clone()];
            if let Some(k) = emitted.windows(2).position(|w| w[1] < w[0]) {
                report.warn(Warning {
                    concern: Concern::TimeOrder,
                    request_id: id(),
                    message: format!(
                        "request {:?}: token {} was emitted before token {}; its ITL is negative",
                        trace.request_id(r),
                        idx[k + 1],
                        idx[k]
                    ),
                });
            }
            if let Some(usage) = trace.requests.output_tokens.at(r as usize)
                && usage as usize != tokens.len()
            {
                report.warn(Warning {
                    concern: Concern::TokenMismatch,
                    request_id: id(),
                    message: format!(
                        "request {:?}: output_tokens says {usage} but the trace has {} token records",
                        trace.request_id(r),
                        tokens.len()
                    ),
                });
            }
        }
        if let Some(&n) = missing_iterations.get(&r) {
            report.warn(Warning {
                concern: Concern::UnknownIteration,
                request_id: id(),
                message: format!(
                    "request {:?}: {n} token or stage record(s) name iterations of source {:?} that the trace \
                     does not have",
                    trace.request_id(r),
                    trace.label(trace.requests.source[r as usize]).unwrap_or(DEFAULT_SOURCE)
                ),
            });
        }
    }
}

mod combine;
mod prune;
#[cfg(test)]
mod tests;
