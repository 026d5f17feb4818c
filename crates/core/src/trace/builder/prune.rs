//! A builder's records cut and moved in time, before it is finished: what a watch keeps from look to look
//! (`import::llamacpp_log::frozen`) loses what the log forgot and follows the log's clock as it is placed anew.

use super::*;
use crate::trace::column::retain_by;

/// How many rows `keep` drops, when any.
fn dropping(keep: &[bool]) -> Option<usize> {
    let n = keep.iter().filter(|k| !**k).count();
    (n > 0).then_some(n)
}

impl TraceBuilder {
    /// Drops the requests whose label id `drop_request` names, with their stages, tokens and references, and the
    /// steps `drop_step(source, iteration)` names; the report counts the records left. In place: a watch cuts a
    /// few of its oldest records at each look from tables of a hundred thousand rows.
    pub fn drop_records(&mut self, drop_request: impl Fn(u32) -> bool, drop_step: impl Fn(u32, i64) -> bool) {
        let mut dropped = 0usize;
        let keep: Vec<bool> = self.requests.id.iter().map(|&id| !drop_request(id)).collect();
        if let Some(n) = dropping(&keep) {
            dropped += n;
            self.requests.retain_rows(&keep);
            retain_by(&mut self.request_places, &keep);
            self.request_by_id = rows_by_id(&self.requests.id);
        }
        self.rejected_requests.retain(|&id, _| !drop_request(id));
        let it = &self.iterations;
        let keep: Vec<bool> = (0..it.len())
            .map(|i| !drop_step(it.source[i], it.iteration[i]))
            .collect();
        if let Some(n) = dropping(&keep) {
            dropped += n;
            self.iterations.retain_rows(&keep);
            retain_by(&mut self.iteration_places, &keep);
            // Each row kept moves up by the rows dropped before it.
            let mut row = 0u32;
            let moved: Vec<u32> = keep
                .iter()
                .map(|&k| {
                    row += u32::from(k);
                    row.wrapping_sub(1)
                })
                .collect();
            self.iteration_by_key.retain(|_, r| {
                let kept = keep.get(*r as usize).copied().unwrap_or(false);
                *r = moved.get(*r as usize).copied().unwrap_or(NULL_U32);
                kept
            });
        }
        let keep: Vec<bool> = self.stages.request.iter().map(|&r| !drop_request(r)).collect();
        if let Some(n) = dropping(&keep) {
            dropped += n;
            self.stages.retain_rows(&keep);
            retain_by(&mut self.stage_places, &keep);
        }
        let keep: Vec<bool> = self.tokens.request.iter().map(|&r| !drop_request(r)).collect();
        if let Some(n) = dropping(&keep) {
            dropped += n;
            if self.candidates.is_empty() {
                self.cand_start.truncate(self.tokens.len() - n + 1);
            } else {
                let mut candidates = Candidates::default();
                let mut starts = Vec::with_capacity(keep.len() - n + 1);
                starts.push(0u32);
                for (t, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
                    for c in self.cand_start[t]..self.cand_start[t + 1] {
                        candidates.push(self.candidates.row(c as usize));
                    }
                    starts.push(u32::try_from(candidates.len()).unwrap_or(u32::MAX));
                }
                (self.candidates, self.cand_start) = (candidates, starts);
            }
            self.tokens.retain_rows(&keep);
            retain_by(&mut self.token_places, &keep);
        }
        let keep: Vec<bool> = self.references.request.iter().map(|&r| !drop_request(r)).collect();
        if let Some(n) = dropping(&keep) {
            dropped += n;
            self.references.retain_rows(&keep);
            retain_by(&mut self.reference_places, &keep);
        }
        self.report.records = self.report.records.saturating_sub(dropped as u64);
    }

    /// Moves every time the records hold (not their durations) by `by_ns`.
    pub fn shift_times(&mut self, by_ns: i64) {
        let shift = |t: &mut i64| {
            if *t != NULL_I64 {
                *t = t.saturating_add(by_ns);
            }
        };
        let r = &mut self.requests;
        r.arrival_ns.iter_mut().for_each(shift);
        for column in [
            &mut r.scheduled_ns,
            &mut r.first_token_ns,
            &mut r.finished_ns,
            &mut r.sent_ns,
        ] {
            column.map_known(|t| t.saturating_add(by_ns));
        }
        let it = &mut self.iterations;
        it.start_ns.iter_mut().chain(&mut it.end_ns).for_each(shift);
        let st = &mut self.stages;
        st.start_ns.iter_mut().chain(&mut st.end_ns).for_each(shift);
        self.samples.time_ns.iter_mut().for_each(shift);
        let tk = &mut self.tokens;
        tk.emitted_ns.iter_mut().chain(&mut tk.received_ns).for_each(shift);
    }
}
