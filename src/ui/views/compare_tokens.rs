//! The Comparison window's answers token by token (`diff --tokens` in the app): the pairs of answers to the same
//! prompt, where each parts and how far the two runs' distributions were apart up to there; a pair clicked shows
//! both answers with the shared text, each run's own continuation, and both candidate lists at the divergence.

use eframe::egui::{self, RichText, Ui};

use crate::analysis::diff::{Emitted, PairVerdict, TokenDiff, TokenPair, TokenView};
use crate::analysis::tokens::display_text;
use crate::trace::{Flag, NULL_U32, Trace};
use crate::ui::widgets::theme;

/// Pairs listed at most (those that part first, by position).
const LISTED: usize = 30;

/// A token as shown.
fn shown(t: &TokenView) -> String {
    let special = if t.special { Flag::True } else { Flag::Null };
    display_text(
        &Trace::default(),
        t.token_id.unwrap_or(NULL_U32),
        t.text.as_deref(),
        special,
    )
}

/// The text of a request's tokens `range`, as one string.
fn text_of(trace: &Trace, r: u32, range: std::ops::Range<usize>) -> String {
    let rows = trace.tokens_of(r);
    rows.clone()
        .skip(range.start)
        .take(range.end.saturating_sub(range.start))
        .map(|t| trace.texts.get(trace.tokens.text[t]).unwrap_or(""))
        .collect()
}

/// The section: a summary line, the pairs that part, and the one selected.
pub fn tokens_ui(ui: &mut Ui, a: &Trace, b: &Trace, d: &TokenDiff, selected: &mut Option<usize>) {
    let o = &d.overall;
    let parts = o.sampling + o.shifted + o.parted;
    let header = format!(
        "Answers token by token: {} pairs ({}), {parts} part ({} the dice or a near tie, {} shifted, {} without \
         candidates to tell)",
        o.pairs,
        d.pairing.by.describe(),
        o.sampling,
        o.shifted,
        o.parted
    );
    egui::CollapsingHeader::new(header)
        .id_salt("compare-tokens")
        .default_open(false)
        .show(ui, |ui| {
            if let (Some(lo), Some(mid), Some(hi)) =
                (o.first_divergence_min, o.first_divergence_p50, o.first_divergence_max)
            {
                ui.label(format!("They part at tokens {lo} to {hi} (median {mid})."));
            }
            if let (Some(top1), Some(kl)) = (o.top1_agreement, o.kl_mean) {
                ui.label(format!(
                    "Up to there: top-1 agreement {:.1} %, mean KL {kl:.4} nats over the shared candidates (a lower \
                     bound: top-k only); shifted above {} nats",
                    top1 * 100.0,
                    d.kl_shift
                ));
            }
            let mut order: Vec<usize> = (0..d.pairs.len())
                .filter(|&i| d.pairs[i].first_divergence.is_some())
                .collect();
            order.sort_by_key(|&i| (d.pairs[i].first_divergence, i));
            egui::Grid::new("token-pairs")
                .striped(true)
                .num_columns(4)
                .show(ui, |ui| {
                    for h in ["A / B", "part at", "verdict", "mean KL"] {
                        ui.weak(h);
                    }
                    ui.end_row();
                    for &i in order.iter().take(LISTED) {
                        let p = &d.pairs[i];
                        let name = format!("{} / {}", a.request_id(p.row_a), b.request_id(p.row_b));
                        if ui.selectable_label(*selected == Some(i), name).clicked() {
                            *selected = Some(i);
                        }
                        ui.label(p.first_divergence.map_or_else(String::new, |k| format!("token {k}")));
                        let color = match p.verdict {
                            PairVerdict::Shifted => ui.visuals().error_fg_color,
                            PairVerdict::Sampling => theme::SLOWISH_TOKEN,
                            PairVerdict::Identical | PairVerdict::Parted => ui.visuals().text_color(),
                        };
                        ui.label(RichText::new(p.verdict.name()).color(color));
                        ui.label(p.kl_mean.map_or_else(|| "-".to_owned(), |k| format!("{k:.4}")));
                        ui.end_row();
                    }
                });
            if order.len() > LISTED {
                ui.weak(format!("and {} more pairs that part", order.len() - LISTED));
            }
            if let Some(p) = selected.and_then(|i| d.pairs.get(i)) {
                ui.separator();
                pair_ui(ui, a, b, p);
            } else if !order.is_empty() {
                ui.weak("Click a pair to see both answers where they part.");
            }
        });
}

/// Both answers of a pair: the shared text, then each run's continuation, and the two tokens at the divergence with
/// their candidates.
fn pair_ui(ui: &mut Ui, a: &Trace, b: &Trace, p: &TokenPair) {
    let Some(k) = p.first_divergence else { return };
    let k = k as usize;
    const TAIL: usize = 24;
    let shared = text_of(a, p.row_a, 0..k);
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 0.0;
        ui.label(RichText::new(shared).monospace());
    });
    for (tag, trace, row, color) in [("A", a, p.row_a, theme::TRACE_A), ("B", b, p.row_b, theme::TRACE_B)] {
        let rest = text_of(trace, row, k..k + TAIL);
        let rest = if rest.is_empty() {
            "(ends here)".to_owned()
        } else {
            format!("{rest}…")
        };
        ui.label(RichText::new(format!("{tag} goes on: {rest}")).monospace().color(color));
    }
    let Some(div) = &p.divergence else { return };
    ui.columns(2, |cols| {
        side_ui(&mut cols[0], "A", div.a.as_ref(), theme::TRACE_A);
        side_ui(&mut cols[1], "B", div.b.as_ref(), theme::TRACE_B);
    });
}

/// One run's token at the divergence and its candidates.
fn side_ui(ui: &mut Ui, tag: &str, e: Option<&Emitted>, color: egui::Color32) {
    let Some(e) = e else {
        ui.label(format!("{tag}: the answer ended"));
        return;
    };
    let p = e
        .token
        .logprob
        .map_or_else(String::new, |lp| format!(" p {:.1} %", lp.exp() * 100.0));
    let rank = |r: Option<u32>| r.map_or_else(|| "-".to_owned(), |k| k.to_string());
    ui.label(
        RichText::new(format!(
            "{tag}: {:?}{p} (rank {}, in the other run {})",
            shown(&e.token),
            rank(e.rank),
            rank(e.rank_in_other)
        ))
        .color(color)
        .strong(),
    );
    for c in e.candidates.iter().take(8) {
        let p = c
            .logprob
            .map_or_else(String::new, |lp| format!("{:.1} %", lp.exp() * 100.0));
        let mut line = RichText::new(format!("{:<16} {p}", format!("{:?}", shown(c)))).monospace();
        if c.token_id.is_some() && c.token_id == e.token.token_id {
            line = line.color(color);
        }
        ui.label(line);
    }
}
