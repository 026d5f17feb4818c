//! Builders combined: the row groups' builders merged in file order (a file read in parallel), and a finished trace
//! moved back into a builder, to add records to it and finish it again (the join of a client's and a server's
//! halves).

use super::*;

impl TraceBuilder {
    /// checks and the report keep file order.
    pub fn merge(&mut self, other: TraceBuilder) {
        let labels: Vec<u32> = (0..other.labels.len() as u32)
            .map(|i| self.labels.intern(other.labels.str_or_empty(i)))
            .collect();
        let texts: Vec<u32> = (0..other.texts.len() as u32)
            .map(|i| self.texts.intern(other.texts.str_or_empty(i)))
            .collect();
        let label = |id: u32| if id == NO_STR { NO_STR } else { labels[id as usize] };
        let text = |id: u32| if id == NO_STR { NO_STR } else { texts[id as usize] };
        self.report.absorb(other.report);
        if let Some((meta, place)) = other.meta {
            self.set_meta(meta, place);
        }
        for (i, &place) in other.request_places.iter().enumerate() {
            let mut row = other.requests.row(i);
            row.map_labels(label);
            self.add_request(row, place);
        }
        for (id, place) in other.rejected_requests {
            self.rejected_requests.entry(label(id)).or_insert(place);
        }
        for (i, &place) in other.iteration_places.iter().enumerate() {
            let mut row = other.iterations.row(i);
            row.source = label(row.source);
            self.add_iteration(row, place);
        }
        let base = self.samples.len();
        self.samples.append(&other.samples);
        for id in &mut self.samples.source[base..] {
            *id = label(*id);
        }
        // Stages and tokens are appended column by column, their labels and texts mapped after.
        let base = self.stages.len();
        self.stages.append(&other.stages);
        self.stage_places.extend_from_slice(&other.stage_places);
        for id in &mut self.stages.request[base..] {
            *id = label(*id);
        }
        let base = self.tokens.len();
        self.tokens.append(&other.tokens);
        self.token_places.extend_from_slice(&other.token_places);
        for id in &mut self.tokens.request[base..] {
            *id = label(*id);
        }
        for id in &mut self.tokens.text[base..] {
            *id = text(*id);
        }
        let base = self.candidates.len();
        self.candidates.append(&other.candidates);
        for id in &mut self.candidates.text[base..] {
            *id = text(*id);
        }
        let shift = u32::try_from(base).unwrap_or(u32::MAX);
        self.cand_start
            .extend(other.cand_start.iter().skip(1).map(|&s| s.saturating_add(shift)));
        let base = self.references.len();
        self.references.append(&other.references);
        self.reference_places.extend_from_slice(&other.reference_places);
        for id in &mut self.references.request[base..] {
            *id = label(*id);
        }
        for id in &mut self.references.top_text[base..] {
            *id = text(*id);
        }
    }

    /// A builder holding a finished trace's records, moved (not copied) back into builder form: to add records to a
    /// trace and finish it again (the join of a client's and a server's halves). Places are unknown (row 0 of file
    /// 0): the trace's records were checked when it was built. Candidates left on disk are not carried.
    pub fn from_trace(trace: Trace) -> TraceBuilder {
        let Trace {
            meta,
            labels,
            texts,
            requests,
            iterations,
            mut stages,
            samples,
            mut tokens,
            candidates,
            cand_start,
            mut references,
            ..
        } = trace;
        // Stages and tokens name their request by row in a trace, by label id in a builder; their steps' rows are
        // found again when the builder finishes (the steps may be sorted anew).
        for r in &mut stages.request {
            *r = requests.id.get(*r as usize).copied().unwrap_or(NULL_U32);
        }
        stages.iter_row.fill(None);
        for r in &mut tokens.request {
            *r = requests.id.get(*r as usize).copied().unwrap_or(NULL_U32);
        }
        tokens.iter_row.fill(NULL_U32);
        for r in &mut references.request {
            *r = requests.id.get(*r as usize).copied().unwrap_or(NULL_U32);
        }
        references.token.fill(NULL_U32);
        let place = Place::default();
        let request_by_id = rows_by_id(&requests.id);
        let iteration_by_key = (0..iterations.len())
            .map(|i| {
                (
                    (iterations.source[i], iterations.iteration[i]),
                    u32::try_from(i).unwrap_or(u32::MAX),
                )
            })
            .collect();
        let cand_start = if cand_start.len() == tokens.len() + 1 {
            cand_start
        } else {
            vec![0; tokens.len() + 1]
        };
        TraceBuilder {
            meta: meta.present.then_some((meta, place)),
            request_places: vec![place; requests.len()],
            iteration_places: vec![place; iterations.len()],
            stage_places: vec![place; stages.len()],
            token_places: vec![place; tokens.len()],
            reference_places: vec![place; references.len()],
            references,
            labels,
            texts,
            requests,
            request_by_id,
            iterations,
            iteration_by_key,
            stages,
            samples,
            tokens,
            cand_start,
            candidates,
            ..TraceBuilder::default()
        }
    }
}
