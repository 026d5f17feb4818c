//! A continuous-batching engine, modelled on vLLM's scheduler: FCFS waiting queue, a per-step token budget and
//! sequence cap, chunked prefill on (V1: running requests first, then new ones, a long prompt in budget-sized
//! chunks) or off (V0: whenever a waiting prompt fits, a prefill-only step runs ahead of every decode), a KV cache
//! of fixed-size blocks with recompute preemption of the newest request when it runs out, and a prefix cache of
//! prompt blocks. Several instances (`source`s) take requests round-robin or by least load; with disaggregation
//! ([`super::disagg`]), prefill instances hand each request over to a decode instance after a KV transfer.
//!
//! The simulation is a discrete-event loop in time order; everything random comes from seeded generators, so the
//! same configuration and seed give the same trace.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use self::prefix_cache::PrefixCache;
use super::arrivals::{Arrival, PREFIX_BLOCK_TOKENS};
use super::cost::StepWork;
use super::disagg::{Disaggregation, Role};
use super::sampler::{Intent, STOP_IDS, Sampler, vocab};
use tokenscope_core::trace::report::Place;
use tokenscope_core::trace::{
    Candidate, Flag, Iteration, Meta, NO_STR, NULL_U32, Request, SpecRole, Stage, StageKind, Token, Trace, TraceBuilder,
};

pub use super::engine_config::{EngineConfig, KV_BLOCK_TOKENS, MAX_BATCHED_TOKENS, MAX_SEQS, STEP_GAP_NS};

/// The tokens of a prompt's next chunk: up to the budget, keeping the last `tail` tokens for a step of their own.
fn next_chunk(remaining: u32, budget: u32, tail: u32) -> u32 {
    if tail > 0 && remaining > tail {
        (remaining - tail).min(budget)
    } else {
        remaining.min(budget)
    }
}

/// How arriving requests are spread over instances (pinned ones excepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// In turn.
    RoundRobin,
    /// To the instance with the fewest running + waiting requests.
    LeastLoaded,
}

/// The whole simulation's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The instances.
    pub engines: Vec<EngineConfig>,
    /// Routing policy.
    pub routing: Routing,
    /// Candidates written per token.
    pub top_k: usize,
    /// The served model's name.
    pub model: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// The number of each instance's first step (a part of `xlarge` continues the numbering of the last).
    pub first_iteration: i64,
    /// Prefill and decode on instances of their own, or `None`: every instance does both.
    pub disaggregation: Option<Disaggregation>,
    /// With a disaggregation, each engine's role as given (a disaggregated trace replayed as it ran: its prefill
    /// instances hand their requests to its decode instances), in place of each engine becoming the
    /// disaggregation's prefill and decode instances; empty: as the disaggregation says.
    pub roles: Vec<super::disagg::Role>,
}

fn blocks_for(tokens: u32) -> u32 {
    tokens.div_ceil(KV_BLOCK_TOKENS)
}

/// A request in flight.
struct Req {
    label: u32,
    /// The instance it arrived at (its prefill instance when disaggregated).
    source: usize,
    /// The instance it is on now ([`IN_TRANSIT`] while its KV moves to its decode instance).
    engine: usize,
    /// Its decode instance, once handed over.
    decode_engine: Option<usize>,
    /// When its KV arrived at its decode instance.
    received_ns: Option<i64>,
    /// Prompt tokens found in the prefix cache at first admission.
    cached: Option<u32>,
    /// Tokens whose KV is computed in the current residency.
    computed: u32,
    /// Tokens the current prefill must reach (prompt, plus output so far after a preemption).
    prefill_target: u32,
    in_prefill: bool,
    generated: u32,
    blocks: u32,
    scheduled_ns: Option<i64>,
    first_token_ns: Option<i64>,
    finished_ns: Option<i64>,
    finish_reason: &'static str,
    status: &'static str,
    error_code: Option<&'static str>,
    preemptions: u32,
    preempted_at: Option<i64>,
    prefix_cached: bool,
    /// Drafts proposed for it and accepted, over its verify steps (`None` until it speculates).
    spec: Option<(u32, u32)>,
    rng: Pcg64Mcg,
}

/// [`Req::engine`] of a request whose KV is moving between instances.
const IN_TRANSIT: usize = usize::MAX;

struct Engine {
    cfg: EngineConfig,
    role: Role,
    group: usize,
    label: u32,
    clock_ns: i64,
    busy: bool,
    step: i64,
    waiting: VecDeque<usize>,
    running: Vec<usize>,
    free_blocks: u32,
    prefix: PrefixCache,
}

/// One request's share of a step.
#[derive(Clone, Copy)]
struct Item {
    req: usize,
    /// Tokens computed: a prefill chunk's, or a decode's own token and its drafts.
    tokens: u32,
    prefill: bool,
    /// Drafts a decode verifies, and how many of them the step accepts (drawn when the step runs).
    drafts: u32,
    accepted: u32,
}

struct Sim<'a> {
    arrivals: &'a [Arrival],
    engines: Vec<Engine>,
    reqs: Vec<Req>,
    b: TraceBuilder,
    sampler: Sampler,
    step_rng: Pcg64Mcg,
    items: Vec<Item>,
    candidates: Vec<Candidate>,
    disaggregation: Option<Disaggregation>,
    /// Requests whose KV is moving to a decode instance, by arrival time there.
    handoffs: BinaryHeap<Reverse<(i64, usize)>>,
}

/// The next thing to happen in the simulation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A request arrives (first, at equal times).
    Arrival,
    /// A request's KV arrives at its decode instance.
    Handoff,
    /// An engine runs a step.
    Step(usize),
}

/// Simulates the engines serving `arrivals` (sorted by time) and returns the trace they would dump.
pub fn simulate(cfg: &SimConfig, arrivals: &[Arrival]) -> Trace {
    let mut b = TraceBuilder::default();
    let as_given = cfg.disaggregation.is_some() && cfg.roles.len() == cfg.engines.len();
    let instances = match &cfg.disaggregation {
        Some(_) if as_given => super::disagg::as_given(&cfg.engines, &cfg.roles),
        Some(d) => d.expand(&cfg.engines),
        None => super::disagg::plain(&cfg.engines),
    };
    let groups = cfg.engines.len();
    let engines = instances
        .into_iter()
        .map(|i| (i.config, i.role, i.group))
        .map(|(e, role, group)| Engine {
            label: b.labels.intern(&e.name),
            role,
            group,
            clock_ns: i64::MIN,
            busy: false,
            step: cfg.first_iteration,
            waiting: VecDeque::new(),
            running: Vec::new(),
            free_blocks: e.kv_blocks,
            prefix: PrefixCache::new(e.prefix_cache_blocks),
            cfg: e,
        })
        .collect();
    let mut sim = Sim {
        arrivals,
        engines,
        reqs: Vec::with_capacity(arrivals.len()),
        b,
        sampler: Sampler { top_k: cfg.top_k },
        step_rng: Pcg64Mcg::seed_from_u64(cfg.seed ^ 0x5354_4550),
        items: Vec::new(),
        candidates: Vec::new(),
        disaggregation: cfg.disaggregation,
        handoffs: BinaryHeap::new(),
    };
    let mut next = 0usize;
    let mut round_robin = 0usize;
    loop {
        let step = sim
            .engines
            .iter()
            .enumerate()
            .filter(|(_, e)| e.busy)
            .min_by_key(|(i, e)| (e.clock_ns, *i))
            .map(|(i, e)| (e.clock_ns, Event::Step(i)));
        let event = [
            arrivals.get(next).map(|a| (a.at_ns, Event::Arrival)),
            sim.handoffs.peek().map(|Reverse((at, _))| (*at, Event::Handoff)),
            step,
        ]
        .into_iter()
        .flatten()
        .min();
        match event {
            None => break,
            Some((_, Event::Step(e))) => sim.step(e),
            Some((at, Event::Handoff)) => {
                if let Some(Reverse((_, r))) = sim.handoffs.pop() {
                    sim.receive(r, at);
                }
            }
            Some((_, Event::Arrival)) => {
                // Its own instance's (its group's) prefill instances, or every one that takes new requests; with the
                // roles as given, the instance it arrived at (a decode instance's own request, its warm-up, is served
                // there whole, as it was).
                let pin = arrivals[next].source.filter(|&s| s < groups);
                let takers: Vec<usize> = (0..sim.engines.len())
                    .filter(|&i| match pin {
                        Some(g) if as_given => i == g,
                        Some(g) => sim.engines[i].role != Role::Decode && sim.engines[i].group == g,
                        None => sim.engines[i].role != Role::Decode,
                    })
                    .collect();
                let target = match cfg.routing {
                    Routing::RoundRobin if pin.is_none() => {
                        round_robin += 1;
                        takers
                            .get((round_robin - 1) % takers.len().max(1))
                            .copied()
                            .unwrap_or(0)
                    }
                    _ => sim.least_loaded(&takers),
                };
                sim.arrive(next, target, cfg.seed);
                next += 1;
            }
        }
    }
    sim.finish(cfg)
}

impl Sim<'_> {
    /// Of `engines`, the one with the fewest running and waiting requests (the first of equals).
    fn least_loaded(&self, engines: &[usize]) -> usize {
        engines
            .iter()
            .copied()
            .min_by_key(|&i| (self.engines[i].running.len() + self.engines[i].waiting.len(), i))
            .unwrap_or(0)
    }

    /// Wakes engine `e` at `at` if it was idle.
    fn wake(&mut self, e: usize, at: i64) {
        let eng = &mut self.engines[e];
        if !eng.busy {
            eng.busy = true;
            eng.clock_ns = eng.clock_ns.max(at);
        }
    }

    fn arrive(&mut self, index: usize, engine: usize, seed: u64) {
        let a = &self.arrivals[index];
        let label = self.b.labels.intern(&a.id);
        let mut req = Req {
            label,
            source: engine,
            engine,
            decode_engine: None,
            received_ns: None,
            cached: None,
            computed: 0,
            prefill_target: a.input_tokens,
            in_prefill: true,
            generated: 0,
            blocks: 0,
            scheduled_ns: None,
            first_token_ns: None,
            finished_ns: None,
            finish_reason: "stop",
            status: "ok",
            error_code: None,
            preemptions: 0,
            preempted_at: None,
            prefix_cached: false,
            spec: None,
            rng: Pcg64Mcg::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        };
        let e = &mut self.engines[engine];
        // A request that could not fit in the KV cache even alone is refused at once, as an engine refuses a
        // prompt plus max_tokens beyond its context length.
        if blocks_for(a.input_tokens.saturating_add(a.max_tokens)) > e.cfg.kv_blocks {
            req.finished_ns = Some(a.at_ns);
            req.finish_reason = "error";
            req.status = "error";
            req.error_code = Some("context_length_exceeded");
            self.reqs.push(req);
            return;
        }
        self.reqs.push(req);
        e.waiting.push_back(self.reqs.len() - 1);
        let at = a.at_ns;
        self.wake(engine, at);
    }

    /// Looks the head of the waiting queue up in the prefix cache when it starts a residency.
    fn prepare_head(&mut self, e: usize) -> Option<usize> {
        let r = *self.engines[e].waiting.front()?;
        let req = &mut self.reqs[r];
        if req.computed == 0 {
            let a = &self.arrivals[r];
            let hit = self.engines[e].prefix.hit_blocks(&a.prefix_blocks) as u32 * PREFIX_BLOCK_TOKENS;
            let hit = hit
                .min(a.input_tokens.saturating_sub(1))
                .min(req.prefill_target.saturating_sub(1));
            req.computed = hit;
        }
        Some(r)
    }

    fn preempt(&mut self, e: usize, r: usize, now: i64) {
        let eng = &mut self.engines[e];
        let req = &mut self.reqs[r];
        eng.free_blocks += req.blocks;
        req.blocks = 0;
        req.computed = 0;
        req.in_prefill = true;
        req.prefill_target = self.arrivals[r].input_tokens + req.generated;
        req.preemptions += 1;
        req.preempted_at = Some(now);
        eng.waiting.push_front(r);
    }

    /// Builds the batch of engine `e`'s next step (see the module doc for the policy).
    fn schedule(&mut self, e: usize, now: i64) -> u32 {
        self.items.clear();
        let mut preempted = 0u32;
        let cfg = self.engines[e].cfg.clone();
        let mut budget = cfg.max_num_batched_tokens;
        let head_fits = |sim: &mut Self| {
            let Some(r) = sim.prepare_head(e) else { return false };
            let req = &sim.reqs[r];
            let need = blocks_for(req.prefill_target).saturating_sub(req.blocks);
            sim.engines[e].running.len() < cfg.max_num_seqs as usize && sim.engines[e].free_blocks >= need
        };
        // A decode instance schedules its running decodes first and admits what it received behind them.
        let decode_only = self.engines[e].role == Role::Decode;
        let prefill_first = !cfg.chunked_prefill && !decode_only && head_fits(self);
        if !prefill_first {
            let mut i = 0;
            while i < self.engines[e].running.len() && budget > 0 {
                let r = self.engines[e].running[i];
                let req = &self.reqs[r];
                // A speculating decode verifies its drafts with its own token, within the step's budget.
                let drafts = match &cfg.speculation {
                    Some(sp) if !req.in_prefill => sp.draft_tokens.min(budget - 1),
                    _ => 0,
                };
                let n = if req.in_prefill {
                    next_chunk(req.prefill_target - req.computed, budget, cfg.prefill_tail)
                } else {
                    1 + drafts
                };
                let need = blocks_for(req.computed + n).saturating_sub(req.blocks);
                let mut self_preempted = false;
                while self.engines[e].free_blocks < need {
                    let Some(victim) = self.engines[e].running.pop() else {
                        break;
                    };
                    self.preempt(e, victim, now);
                    preempted += 1;
                    if victim == r {
                        self_preempted = true;
                        break;
                    }
                }
                if self_preempted || self.engines[e].free_blocks < need {
                    break;
                }
                self.engines[e].free_blocks -= need;
                let req = &mut self.reqs[r];
                req.blocks += need;
                self.items.push(Item {
                    req: r,
                    tokens: n,
                    prefill: req.in_prefill,
                    drafts,
                    accepted: 0,
                });
                budget -= n;
                i += 1;
            }
        }
        // As vLLM V1: a step that had to preempt admits nobody new.
        if prefill_first || ((cfg.chunked_prefill || decode_only) && preempted == 0) {
            while budget > 0 && self.engines[e].running.len() < cfg.max_num_seqs as usize {
                let Some(r) = self.prepare_head(e) else { break };
                let req = &self.reqs[r];
                let remaining = req.prefill_target - req.computed;
                if remaining == 0 {
                    // Handed over with its prompt's KV: it joins the decodes.
                    if !self.admit_received(e, r, now) {
                        break;
                    }
                    budget -= 1;
                    continue;
                }
                let n = if cfg.chunked_prefill {
                    next_chunk(remaining, budget, cfg.prefill_tail)
                } else {
                    remaining
                };
                if n > budget && !self.items.is_empty() {
                    break; // prefill-first steps take whole prompts; a lone oversized prompt still runs
                }
                let need = blocks_for(req.computed + n).saturating_sub(req.blocks);
                if self.engines[e].free_blocks < need {
                    break; // the head waits for memory, and everyone behind it (FCFS)
                }
                self.engines[e].waiting.pop_front();
                self.engines[e].running.push(r);
                self.engines[e].free_blocks -= need;
                let label = self.reqs[r].label;
                let req = &mut self.reqs[r];
                req.blocks += need;
                req.scheduled_ns.get_or_insert(now);
                // The prefix-cache hit of its first admission is what the engine reports as cached tokens.
                req.cached.get_or_insert(req.computed);
                if let Some(since) = req.preempted_at.take() {
                    self.b.add_stage(
                        Stage {
                            request: label,
                            kind: StageKind::Preempted,
                            start_ns: since,
                            end_ns: now,
                            iteration: None,
                            iter_row: None,
                            tokens: None,
                            bytes: None,
                            retries: None,
                        },
                        Place::default(),
                    );
                }
                self.items.push(Item {
                    req: r,
                    tokens: n,
                    prefill: true,
                    drafts: 0,
                    accepted: 0,
                });
                budget = budget.saturating_sub(n);
            }
        }
        preempted
    }

    fn step(&mut self, e: usize) {
        let now = self.engines[e].clock_ns;
        let waiting_at_start = self.engines[e].waiting.len();
        let preempted = self.schedule(e, now);
        if self.items.is_empty() {
            // Nothing could run. With nothing running either, the head of the queue can never fit: fail it rather
            // than wait forever (requests that cannot fit alone are refused on arrival, so this is a safety net).
            if self.engines[e].running.is_empty()
                && let Some(r) = self.engines[e].waiting.pop_front()
            {
                let req = &mut self.reqs[r];
                req.finished_ns = Some(now);
                req.finish_reason = "error";
                req.status = "error";
                req.error_code = Some("kv_cache_exhausted");
            }
            let eng = &mut self.engines[e];
            eng.busy = !(eng.running.is_empty() && eng.waiting.is_empty());
            eng.clock_ns += 1_000_000;
            return;
        }
        let mut work = StepWork::default();
        let speculation = self.engines[e].cfg.speculation.as_ref();
        let speculating = speculation.is_some();
        let (mut drafted, mut accepted, mut draft_passes) = (0u32, 0u32, 0u32);
        for it in &mut self.items {
            let req = &mut self.reqs[it.req];
            if it.prefill {
                work.add_prefill(u64::from(it.tokens), u64::from(req.computed));
            } else {
                work.add_verify(u64::from(req.computed), u64::from(it.drafts));
                if let Some(sp) = speculation.filter(|_| it.drafts > 0) {
                    it.accepted = sp.accepted(&mut req.rng).min(it.drafts);
                    drafted += it.drafts;
                    accepted += it.accepted;
                    draft_passes = draft_passes.max(it.drafts);
                }
            }
        }
        let eng = &self.engines[e];
        // The drafter runs a pass per draft position over the batch before the verify pass.
        #[expect(clippy::cast_possible_truncation, reason = "a drafter's ms, far below 2^63 ns")]
        let drafting_ns = speculation.map_or(0, |sp| (sp.draft_ms * f64::from(draft_passes) * 1e6).round() as i64);
        let duration = eng.cfg.cost.sample_ns(&work, &mut self.step_rng) + drafting_ns;
        let (start, end) = (now, now + duration);
        let n_items = self.items.len() as i64;
        let schedule_ns = (200_000 + 2_000 * n_items).min(duration / 4);
        let sample_ns = (150_000 + 3_000 * n_items).min(duration / 4);
        let count = |f: &dyn Fn(&Item) -> bool| u32::try_from(self.items.iter().filter(|i| f(i)).count()).ok();
        let used = eng.cfg.kv_blocks - eng.free_blocks;
        self.b.add_iteration(
            Iteration {
                source: eng.label,
                iteration: eng.step,
                start_ns: start,
                end_ns: end,
                schedule_ns: Some(schedule_ns),
                forward_ns: Some(duration - schedule_ns - sample_ns),
                sample_ns: Some(sample_ns),
                num_reqs: count(&|_| true),
                num_prefill_reqs: count(&|i| i.prefill),
                num_decode_reqs: count(&|i| !i.prefill),
                num_prefill_tokens: u32::try_from(work.prefill_tokens).ok(),
                num_decode_tokens: u32::try_from(work.decode_seqs).ok(),
                num_waiting: u32::try_from(waiting_at_start).ok(),
                kv_usage: Some(f64::from(used) / f64::from(eng.cfg.kv_blocks.max(1))),
                num_preempted: Some(preempted),
                spec_drafted_tokens: speculating.then_some(drafted),
                spec_accepted_tokens: speculating.then_some(accepted),
            },
            Place::default(),
        );
        let iteration = eng.step;
        let items = std::mem::take(&mut self.items);
        for it in &items {
            let label = self.reqs[it.req].label;
            let req = &mut self.reqs[it.req];
            // A verify step keeps the KV of what it accepted; the rejected drafts' is dropped.
            req.computed += if it.prefill { it.tokens } else { 1 + it.accepted };
            let emits = if it.prefill {
                self.b.add_stage(
                    Stage {
                        request: label,
                        kind: StageKind::Prefill,
                        start_ns: start,
                        end_ns: end,
                        iteration: Some(iteration),
                        iter_row: None,
                        tokens: Some(it.tokens),
                        bytes: None,
                        retries: None,
                    },
                    Place::default(),
                );
                req.computed >= req.prefill_target
            } else {
                true
            };
            if emits {
                if req.in_prefill {
                    req.in_prefill = false;
                    if !req.prefix_cached {
                        req.prefix_cached = true;
                        self.engines[e].prefix.insert(&self.arrivals[it.req].prefix_blocks);
                    }
                }
                if self.engines[e].role == Role::Prefill {
                    self.hand_off(e, it.req, end);
                } else {
                    // Tokens leave the engine after sampling and detokenizing: a fraction of a millisecond.
                    let emitted = end + 50_000 + (it.req as i64 % 7) * 20_000;
                    if it.drafts == 0 {
                        let role = if speculating {
                            SpecRole::Plain
                        } else {
                            SpecRole::Unknown
                        };
                        self.emit(e, it.req, iteration, emitted, (role, None));
                    } else {
                        let req = &mut self.reqs[it.req];
                        let (d, a) = req.spec.unwrap_or((0, 0));
                        req.spec = Some((d + it.drafts, a + it.accepted));
                        // The accepted drafts, then the step's own token; the rest of a burst that stopped is dropped.
                        for k in 0..=it.accepted {
                            let role = if k < it.accepted {
                                SpecRole::Draft
                            } else {
                                SpecRole::Bonus
                            };
                            let drafted = (k == 0).then_some(it.drafts);
                            if !self.emit(e, it.req, iteration, emitted, (role, drafted)) {
                                break;
                            }
                        }
                    }
                }
            }
        }
        self.items = items;
        let eng = &mut self.engines[e];
        eng.running
            .retain(|&r| self.reqs[r].finished_ns.is_none() && self.reqs[r].engine == e);
        eng.step += 1;
        eng.clock_ns = end + STEP_GAP_NS;
        eng.busy = !(eng.running.is_empty() && eng.waiting.is_empty());
    }

    /// Emits request `r`'s next token, with its speculative role and, on a verify step's first token, the drafts
    /// the step proposed; false when the request is finished.
    fn emit(&mut self, e: usize, r: usize, iteration: i64, emitted_ns: i64, spec: (SpecRole, Option<u32>)) -> bool {
        if self.reqs[r].finished_ns.is_some() {
            return false;
        }
        let a = &self.arrivals[r];
        let req = &mut self.reqs[r];
        let index = req.generated;
        let intent = match a.mistrigger {
            Some((at, p)) if at == index => Intent::Mistrigger { p },
            _ if index + 1 >= a.output_tokens => Intent::Stop,
            _ => Intent::Continue,
        };
        let s = self.sampler.sample(intent, &mut req.rng);
        self.candidates.clear();
        for &(id, logprob) in &s.top {
            let v = vocab(id);
            self.candidates.push(Candidate {
                token_id: id,
                text: self.b.texts.intern(v.text),
                logprob,
                special: if v.special { Flag::True } else { Flag::Null },
            });
        }
        let v = vocab(s.token_id);
        let token = Token {
            request: req.label,
            index,
            emitted_ns,
            iteration,
            iter_row: NULL_U32,
            token_id: s.token_id,
            text: self.b.texts.intern(v.text),
            special: if v.special { Flag::True } else { Flag::Null },
            logprob: s.logprob,
            rank: s.rank,
            received_ns: tokenscope_core::trace::NULL_I64,
            spec: spec.0,
            spec_drafted: spec
                .1
                .and_then(|d| u8::try_from(d).ok())
                .unwrap_or(tokenscope_core::trace::NULL_U8),
        };
        self.b.add_token(token, self.candidates.drain(..), Place::default());
        req.generated += 1;
        req.first_token_ns.get_or_insert(emitted_ns);
        let stop = STOP_IDS.contains(&s.token_id);
        if stop || req.generated >= a.max_tokens {
            req.finished_ns = Some(emitted_ns);
            req.finish_reason = if stop { "stop" } else { "length" };
            self.engines[e].free_blocks += req.blocks;
            req.blocks = 0;
        }
        req.finished_ns.is_none()
    }

    fn finish(mut self, cfg: &SimConfig) -> Trace {
        let model = self.b.labels.intern(&cfg.model);
        let mut last_ns = 0;
        for (r, a) in self.arrivals.iter().enumerate().take(self.reqs.len()) {
            let req = &self.reqs[r];
            last_ns = last_ns.max(req.finished_ns.unwrap_or(a.at_ns));
            let row = Request {
                id: req.label,
                source: self.engines[req.source].label,
                trace_id: NO_STR,
                model,
                app_id: self.b.labels.intern(&a.app_id),
                user_id: self.b.labels.intern(&a.user_id),
                arrival_ns: a.at_ns,
                scheduled_ns: req.scheduled_ns,
                first_token_ns: req.first_token_ns,
                finished_ns: req.finished_ns,
                input_tokens: Some(a.input_tokens),
                cached_tokens: Some(req.cached.unwrap_or(0)),
                context_tokens: None,
                output_tokens: Some(req.generated),
                finish_reason: self.b.labels.intern(req.finish_reason),
                status: self.b.labels.intern(req.status),
                error_code: req.error_code.map_or(NO_STR, |c| self.b.labels.intern(c)),
                temperature: Some(0.7),
                top_p: Some(0.95),
                top_k: None,
                max_tokens: Some(i64::from(a.max_tokens)),
                seed: None,
                num_preemptions: Some(req.preemptions),
                prompt_hash: NO_STR,
                server_queue_ns: None,
                server_ttft_ns: None,
                server_decode_ns: None,
                sent_ns: None,
                server_request_id: NO_STR,
                spec_drafted_tokens: req.spec.map(|s| s.0),
                spec_accepted_tokens: req.spec.map(|s| s.1),
                decode_source: req.decode_engine.map_or(NO_STR, |d| self.engines[d].label),
            };
            self.b.add_request(row, Place::default());
        }
        self.b.set_meta(
            Meta {
                present: true,
                format: Some(tokenscope_core::format::schema::FORMAT_NAME.to_owned()),
                version: Some(tokenscope_core::format::schema::FORMAT_VERSION),
                engine: Some("tokenscope-synth".to_owned()),
                engine_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                model: Some(cfg.model.clone()),
                eos_token_ids: Some(STOP_IDS.to_vec()),
                created_ns: Some(last_ns),
                clock: None,
                note: None,
            },
            Place::default(),
        );
        self.b.finish().0
    }
}

mod handoff;
mod prefix_cache;
#[cfg(test)]
mod tests;
