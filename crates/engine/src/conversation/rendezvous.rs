//! Rendezvous (highest-random-weight) hashing: each candidate scores
//! `-weight / ln(u)`, `u` a uniform draw in (0, 1) from the hash of the conversation's key
//! and the candidate's name. The highest score wins, so a conversation always picks the
//! same candidate from the same set, each candidate wins a share of conversations
//! proportional to its weight, and losing or adding a candidate moves only the
//! conversations that candidate wins or loses.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The candidate's score for `key`; weight 0 scores below every positive weight.
pub fn score(key: u64, name: &str, weight: u32) -> f64 {
    if weight == 0 {
        return f64::NEG_INFINITY;
    }
    let h = xxh3_64_with_seed(name.as_bytes(), key);
    // The top 53 bits as a draw in (0, 1): never 0, never 1.
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -f64::from(weight) / u.ln()
}

/// `items` sorted by their [`score`] (`score_of` computes it), best first (ties keep the
/// given order).
pub fn rank<T>(items: Vec<T>, score_of: impl Fn(&T) -> f64) -> Vec<T> {
    let mut scored: Vec<(f64, usize, T)> = items
        .into_iter()
        .enumerate()
        .map(|(i, t)| (score_of(&t), i, t))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, _, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn winner(key: u64, names: &[(&str, u32)]) -> String {
        let v: Vec<(String, u32)> = names.iter().map(|(n, w)| (n.to_string(), *w)).collect();
        rank(v, |(n, w)| score(key, n, *w))[0].0.clone()
    }

    #[test]
    fn shares_follow_weights_and_choices_are_stable() {
        let mut wins = [0u32; 2];
        for key in 0..20_000u64 {
            let w = winner(key, &[("a", 1), ("b", 3)]);
            assert_eq!(w, winner(key, &[("a", 1), ("b", 3)]));
            wins[usize::from(w == "b")] += 1;
        }
        let share = f64::from(wins[1]) / 20_000.0;
        assert!((0.72..0.78).contains(&share), "{share}");
    }

    #[test]
    fn losing_a_candidate_moves_only_its_own_share() {
        let (mut moved, mut stayed) = (0, 0);
        for key in 0..10_000u64 {
            let before = winner(key, &[("a", 1), ("b", 1), ("c", 1)]);
            let after = winner(key, &[("a", 1), ("b", 1)]);
            if before == "c" {
                moved += 1;
            } else {
                assert_eq!(before, after, "key {key} moved without reason");
                stayed += 1;
            }
        }
        assert!(moved > 2_500 && stayed > 6_000, "{moved} {stayed}");
    }

    #[test]
    fn weight_zero_comes_last_and_order_is_a_permutation() {
        let v: Vec<(String, u32)> = vec![("z".into(), 0), ("a".into(), 1), ("b".into(), 2)];
        let v = rank(v, |(n, w)| score(42, n, *w));
        assert_eq!(v[2].0, "z");
        let mut names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "b", "z"]);
    }
}
