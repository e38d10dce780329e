//! ACT-R activation: the score recall ranks memories by.
//!
//! `activation = W_BASE·base + W_SPREAD·spread + W_EMOTION·emotion
//!             + W_SIGNIFICANCE·significance + (salience − 0.5)·W_SALIENCE + personality`
//!
//! * **base**: ACT-R base-level learning, `ln Σ t_j^−d` over the access history (`t_j`
//!   seconds since each access, at least 1, `d` = 0.5); a memory without history uses
//!   `(importance − 5)·0.2` instead.
//! * **spread**: query relevance in `0..1`, supplied by the caller (the reference uses
//!   its lazily built BM25, see [`super::reference_bm25`]).
//! * **emotion**: `min(1, arousal + 0.3·|valence|)` of the somatic marker.
//! * **personality**: OCEAN modulation; zero for a neutral (all 0.5) personality.
//!
//! The functions are pure and shared by both profiles; the sums are evaluated in the
//! reference's order so the `reference` profile reproduces its floats bit for bit.

use crate::model::{MemoryEntry, MemoryType, SomaticMarker, Timestamp};

/// ACT-R decay exponent `d`.
pub const DECAY_RATE: f64 = 0.5;
/// The smallest age, in seconds, an access counts with (avoids `0^−d`).
pub const MIN_AGE_SECONDS: f64 = 1.0;
/// Weight of the base-level term.
pub const W_BASE: f64 = 1.0;
/// Weight of the spreading (query relevance) term.
pub const W_SPREAD: f64 = 2.0;
/// Weight of the emotional boost.
pub const W_EMOTION: f64 = 0.5;
/// Weight of the write-time significance.
pub const W_SIGNIFICANCE: f64 = 0.3;
/// Weight of the salience offset.
pub const W_SALIENCE: f64 = 0.5;
/// Salience at which the salience term is zero.
pub const NEUTRAL_SALIENCE: f64 = 0.5;
/// Importance at which the no-history base level is zero.
pub const IMPORTANCE_PIVOT: i32 = 5;
/// Base level per importance point above [`IMPORTANCE_PIVOT`] when there is no history.
pub const IMPORTANCE_SCALE: f64 = 0.2;
/// Share of `|valence|` added to arousal in the emotional boost.
pub const VALENCE_SHARE: f64 = 0.3;
/// Per-trait weight of the personality modulation (all five traits use it).
pub const W_TRAIT: f64 = 0.3;
/// The neutral trait value (no modulation).
pub const NEUTRAL_TRAIT: f64 = 0.5;
/// Share of an entity count (per entity) in the extraversion signal.
pub const ENTITY_SHARE: f64 = 0.3;

/// `(now − then)` in seconds, as Python's `timedelta.total_seconds()` computes it
/// (whole microseconds divided by 10⁶).
#[must_use]
pub fn seconds_between(now: Timestamp, then: Timestamp) -> f64 {
    let delta = now - then;
    match delta.num_microseconds() {
        Some(us) => us as f64 / 1e6,
        None => delta.num_milliseconds() as f64 / 1e3,
    }
}

/// ACT-R base-level activation `ln Σ max(1, t_j)^−d` over the access times (0 when
/// there are none). Terms are summed in the given order.
#[must_use]
pub fn base_level_activation(timestamps: &[Timestamp], now: Timestamp) -> f64 {
    if timestamps.is_empty() {
        return 0.0;
    }
    let mut total = 0.0;
    for ts in timestamps {
        total += decay_term(seconds_between(now, *ts));
    }
    if total <= 0.0 { 0.0 } else { total.ln() }
}

/// One access's contribution to the base level: `max(1, age)^−d`, age in seconds.
#[must_use]
pub fn decay_term(age_seconds: f64) -> f64 {
    age_seconds.max(MIN_AGE_SECONDS).powf(-DECAY_RATE)
}

/// The base level of a memory without access history: `(importance − 5)·0.2`.
#[must_use]
pub fn importance_base(importance: u8) -> f64 {
    f64::from(i32::from(importance) - IMPORTANCE_PIVOT) * IMPORTANCE_SCALE
}

/// The base level the reference uses for `entry`: ACT-R over its access timestamps, or
/// [`importance_base`] when it has none.
#[must_use]
pub fn base_level(entry: &MemoryEntry, now: Timestamp) -> f64 {
    if entry.access_timestamps.is_empty() {
        importance_base(entry.importance)
    } else {
        base_level_activation(&entry.access_timestamps, now)
    }
}

/// Emotional boost `min(1, arousal + 0.3·|valence|)`; 0 without a somatic marker.
#[must_use]
pub fn emotional_boost(somatic: Option<&SomaticMarker>) -> f64 {
    somatic.map_or(0.0, |s| emotion_of(s.valence, s.arousal))
}

/// The emotional boost of a marker's valence and arousal: `min(1, arousal + 0.3·|valence|)`.
#[must_use]
pub fn emotion_of(valence: f64, arousal: f64) -> f64 {
    (arousal + valence.abs() * VALENCE_SHARE).min(1.0)
}

/// Significance term `0.3·significance` (0 when significance is 0).
#[must_use]
pub fn significance_boost(significance: f64) -> f64 {
    if significance == 0.0 { 0.0 } else { W_SIGNIFICANCE * significance }
}

/// Salience term `(salience − 0.5)·0.5`: −0.25 to +0.25.
#[must_use]
pub fn salience_boost(salience: f64) -> f64 {
    (salience - NEUTRAL_SALIENCE) * W_SALIENCE
}

/// OCEAN personality traits, each in `0..=1`; 0.5 is neutral.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Personality {
    /// Boosts semantic and procedural memories.
    pub openness: f64,
    /// Boosts procedural and high-importance memories.
    pub conscientiousness: f64,
    /// Boosts episodic and entity-rich memories.
    pub extraversion: f64,
    /// Boosts positive-valence memories.
    pub agreeableness: f64,
    /// Boosts high-arousal memories.
    pub neuroticism: f64,
}

impl Default for Personality {
    /// All traits neutral: the modulation is exactly 0.
    fn default() -> Self {
        Self {
            openness: NEUTRAL_TRAIT,
            conscientiousness: NEUTRAL_TRAIT,
            extraversion: NEUTRAL_TRAIT,
            agreeableness: NEUTRAL_TRAIT,
            neuroticism: NEUTRAL_TRAIT,
        }
    }
}

fn openness_signal(e: &MemoryEntry) -> f64 {
    if matches!(e.kind, MemoryType::Semantic | MemoryType::Procedural) { 1.0 } else { 0.0 }
}

fn conscientiousness_signal(e: &MemoryEntry) -> f64 {
    let mut s = 0.0;
    if e.kind == MemoryType::Procedural {
        s += 1.0;
    }
    if e.importance >= 7 {
        s += f64::from(i32::from(e.importance) - 6) / 4.0;
    }
    s.min(1.0)
}

fn extraversion_signal(e: &MemoryEntry) -> f64 {
    let mut s = 0.0;
    if e.kind == MemoryType::Episodic {
        s += 1.0;
    }
    if !e.entities.is_empty() {
        s += (e.entities.len() as f64 * ENTITY_SHARE).min(1.0);
    }
    s.min(1.0)
}

fn agreeableness_signal(e: &MemoryEntry) -> f64 {
    e.somatic.as_ref().map_or(0.0, |s| s.valence.max(0.0))
}

fn neuroticism_signal(e: &MemoryEntry) -> f64 {
    e.somatic.as_ref().map_or(0.0, |s| (s.arousal + s.valence.abs() * VALENCE_SHARE).min(1.0))
}

/// The personality modulation `Σ (trait − 0.5)·signal·0.3` over the five traits; 0 for
/// `None` and for a neutral personality.
#[must_use]
pub fn personality_boost(entry: &MemoryEntry, personality: Option<&Personality>) -> f64 {
    let Some(p) = personality else {
        return 0.0;
    };
    let mut boost = 0.0;
    boost += (p.openness - NEUTRAL_TRAIT) * openness_signal(entry) * W_TRAIT;
    boost += (p.conscientiousness - NEUTRAL_TRAIT) * conscientiousness_signal(entry) * W_TRAIT;
    boost += (p.extraversion - NEUTRAL_TRAIT) * extraversion_signal(entry) * W_TRAIT;
    boost += (p.agreeableness - NEUTRAL_TRAIT) * agreeableness_signal(entry) * W_TRAIT;
    boost += (p.neuroticism - NEUTRAL_TRAIT) * neuroticism_signal(entry) * W_TRAIT;
    boost
}

/// One memory's activation, term by term, so a trace can explain its rank.
///
/// `base`, `spread` and `emotion` are the unweighted components; `significance`,
/// `salience` and `personality` are the terms as added. `total` is the score.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ActivationBreakdown {
    /// Base level (ACT-R or the importance fallback).
    pub base: f64,
    /// Query relevance in `0..1`.
    pub spread: f64,
    /// Emotional boost in `0..1`.
    pub emotion: f64,
    /// `0.3·significance`.
    pub significance: f64,
    /// `(salience − 0.5)·0.5`.
    pub salience: f64,
    /// Personality modulation.
    pub personality: f64,
    /// `W_BASE·base + W_SPREAD·spread + W_EMOTION·emotion + significance + salience +
    /// personality`, summed in that order.
    pub total: f64,
}

impl ActivationBreakdown {
    /// Scores `entry` at `now` given its query relevance `spread` (noise-free, as the
    /// reference's recall does).
    #[must_use]
    pub fn compute(
        entry: &MemoryEntry,
        spread: f64,
        now: Timestamp,
        personality: Option<&Personality>,
    ) -> Self {
        let base = base_level(entry, now);
        let emotion = emotional_boost(entry.somatic.as_ref());
        let significance = significance_boost(entry.significance);
        let salience = salience_boost(entry.salience);
        let personality = personality_boost(entry, personality);
        let total = W_BASE * base
            + W_SPREAD * spread
            + W_EMOTION * emotion
            + significance
            + salience
            + personality;
        Self { base, spread, emotion, significance, salience, personality, total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn ts(h: u32, m: u32, s: u32) -> Timestamp {
        NaiveDate::from_ymd_opt(2026, 1, 1).and_then(|d| d.and_hms_opt(h, m, s)).unwrap_or_default()
    }

    #[test]
    fn base_level_uses_power_law_with_one_second_floor() {
        let now = ts(12, 0, 0);
        assert_eq!(base_level_activation(&[now], now), 0.0);
        let b = base_level_activation(&[ts(11, 0, 0)], now);
        assert!((b - (3600f64).powf(-0.5).ln()).abs() < 1e-12);
        assert_eq!(base_level_activation(&[], now), 0.0);
    }

    #[test]
    fn neutral_personality_is_zero_and_importance_fallback() {
        let mut e = MemoryEntry::new(MemoryType::Procedural, "x");
        e.importance = 9;
        assert_eq!(personality_boost(&e, Some(&Personality::default())), 0.0);
        assert!((importance_base(10) - 1.0).abs() < 1e-12);
        assert!((importance_base(1) + 0.8).abs() < 1e-12);
        let p = Personality { conscientiousness: 1.0, ..Personality::default() };
        assert!((personality_boost(&e, Some(&p)) - 0.15).abs() < 1e-12);
    }
}
