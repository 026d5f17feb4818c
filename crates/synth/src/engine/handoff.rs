//! Disaggregated serving in the engine loop: a prefill instance hands a request over, its KV moves, a decode
//! instance admits it (see [`crate::disagg`]).

use std::cmp::Reverse;

use super::{IN_TRANSIT, Item, Role, Sim, blocks_for};
use tokenscope_core::trace::report::Place;
use tokenscope_core::trace::{Stage, StageKind};

impl Sim<'_> {
    /// A request's prompt is computed on prefill instance `e` at `end`: its KV starts moving to a decode instance.
    /// The prefill instance frees its blocks now (see the module doc of [`super::disagg`]).
    pub(super) fn hand_off(&mut self, e: usize, r: usize, end: i64) {
        let Some(d) = self.disaggregation else { return };
        let req = &mut self.reqs[r];
        let tokens = req.computed;
        let done = end + d.transfer.duration_ns(tokens);
        self.engines[e].free_blocks += req.blocks;
        req.blocks = 0;
        req.in_prefill = false;
        req.engine = IN_TRANSIT;
        let label = req.label;
        self.b.add_stage(
            Stage {
                request: label,
                kind: StageKind::KvTransfer,
                start_ns: end,
                end_ns: done,
                iteration: None,
                iter_row: None,
                tokens: Some(tokens),
                bytes: Some(d.transfer.bytes(tokens)),
                retries: None,
            },
            Place::default(),
        );
        self.handoffs.push(Reverse((done, r)));
    }

    /// A request's KV arrives at `at`: it waits for admission on its group's least loaded decode instance.
    pub(super) fn receive(&mut self, r: usize, at: i64) {
        let group = self.engines[self.reqs[r].source].group;
        let decoders: Vec<usize> = (0..self.engines.len())
            .filter(|&i| self.engines[i].role == Role::Decode && self.engines[i].group == group)
            .collect();
        let d = self.least_loaded(&decoders);
        let req = &mut self.reqs[r];
        req.engine = d;
        req.decode_engine = Some(d);
        req.received_ns = Some(at);
        self.engines[d].waiting.push_back(r);
        self.wake(d, at);
    }

    /// Admits request `r`, received from a prefill instance, to decode on engine `e` in the step starting `now`;
    /// false when its next token's KV block does not fit (it waits, and everyone behind it).
    pub(super) fn admit_received(&mut self, e: usize, r: usize, now: i64) -> bool {
        let req = &self.reqs[r];
        let need = blocks_for(req.computed + 1).saturating_sub(req.blocks);
        if self.engines[e].free_blocks < need {
            return false;
        }
        self.engines[e].waiting.pop_front();
        self.engines[e].running.push(r);
        self.engines[e].free_blocks -= need;
        let arrival = self.arrivals[r].at_ns;
        let req = &mut self.reqs[r];
        req.blocks += need;
        // Its queues, on the prefill instance and on this one, are explicit stages: derived ones would end at its
        // first token.
        let waits = [(Some(arrival), req.scheduled_ns), (req.received_ns.take(), Some(now))];
        let label = req.label;
        for (start, end) in waits {
            if let (Some(start_ns), Some(end_ns)) = (start, end)
                && end_ns > start_ns
            {
                let stage = Stage {
                    request: label,
                    kind: StageKind::Queue,
                    start_ns,
                    end_ns,
                    iteration: None,
                    iter_row: None,
                    tokens: None,
                    bytes: None,
                    retries: None,
                };
                self.b.add_stage(stage, Place::default());
            }
        }
        // Its first step on the decode instance samples one token (drafting starts once it runs).
        self.items.push(Item {
            req: r,
            tokens: 1,
            prefill: false,
            drafts: 0,
            accepted: 0,
        });
        true
    }
}
