//! Fairness of a waiting room's admissions: Kendall's rank correlation between two orders
//! of the same fans (queue position, arrival, admission), in O(n log n).
//!
//! τ-b (ties in either order counted as neither concordant nor discordant, as for the
//! admissions of one release tick observed in the same millisecond) by Knight's algorithm:
//! sort the pairs by the first key (then the second), count the ties, then merge-sort by the
//! second key counting the swaps, which are the discordant pairs.

/// Kendall's τ-b of `pairs` (x, y), or `None` with fewer than two pairs or when either
/// order is all ties. Sorts `pairs` in place.
pub fn kendall_tau_b(pairs: &mut [(u64, u64)]) -> Option<f64> {
    let n = pairs.len() as u64;
    if n < 2 {
        return None;
    }
    let all = n * (n - 1) / 2;
    pairs.sort_unstable();
    let ties_x = tied_pairs(pairs.iter().map(|p| p.0));
    let ties_xy = tied_pairs(pairs.iter().copied());
    let mut ys: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    let mut scratch = vec![0; ys.len()];
    let swaps = merge_sort_swaps(&mut ys, &mut scratch);
    let ties_y = tied_pairs(ys.iter().copied());
    let denominator = ((all - ties_x) as f64 * (all - ties_y) as f64).sqrt();
    if denominator == 0.0 {
        return None;
    }
    let numerator =
        all as f64 - ties_x as f64 - ties_y as f64 + ties_xy as f64 - 2.0 * swaps as f64;
    Some(numerator / denominator)
}

/// The z score of τ under independence (`3τ·√(n(n−1)) / √(2(2n+5))`): |z| < 1.96 means
/// no dependence shows at the 5 % level.
pub fn independence_z(tau: f64, n: u64) -> f64 {
    let n = n as f64;
    3.0 * tau * (n * (n - 1.0)).sqrt() / (2.0 * (2.0 * n + 5.0)).sqrt()
}

/// Pairs of equal neighbours in a sorted sequence (Σ t(t−1)/2 over runs of length t).
fn tied_pairs<T: PartialEq>(sorted: impl Iterator<Item = T>) -> u64 {
    let mut total = 0;
    let mut run = 0u64;
    let mut previous: Option<T> = None;
    for item in sorted {
        if previous.as_ref() == Some(&item) {
            run += 1;
        } else {
            total += run * (run + 1) / 2;
            run = 0;
        }
        previous = Some(item);
    }
    total + run * (run + 1) / 2
}

/// Sorts `values` (stable) and returns the number of inversions (pairs out of order).
fn merge_sort_swaps(values: &mut [u64], scratch: &mut [u64]) -> u64 {
    let n = values.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut swaps = merge_sort_swaps(&mut values[..mid], &mut scratch[..mid])
        + merge_sort_swaps(&mut values[mid..], &mut scratch[mid..]);
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < mid && j < n {
        if values[j] < values[i] {
            scratch[k] = values[j];
            swaps += (mid - i) as u64;
            j += 1;
        } else {
            scratch[k] = values[i];
            i += 1;
        }
        k += 1;
    }
    scratch[k..k + mid - i].copy_from_slice(&values[i..mid]);
    k += mid - i;
    scratch[k..].copy_from_slice(&values[j..]);
    values.copy_from_slice(&scratch[..n]);
    swaps
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// τ-b by its definition, pair by pair.
    fn brute_force(pairs: &[(u64, u64)]) -> Option<f64> {
        let (mut concordant, mut discordant, mut ties_x, mut ties_y) = (0i64, 0i64, 0i64, 0i64);
        for a in 0..pairs.len() {
            for b in a + 1..pairs.len() {
                let dx = pairs[a].0.cmp(&pairs[b].0);
                let dy = pairs[a].1.cmp(&pairs[b].1);
                use std::cmp::Ordering::Equal;
                match (dx, dy) {
                    (Equal, Equal) => {}
                    (Equal, _) => ties_x += 1,
                    (_, Equal) => ties_y += 1,
                    _ if dx == dy => concordant += 1,
                    _ => discordant += 1,
                }
            }
        }
        let d = (((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) as f64)
            .sqrt();
        (d > 0.0).then(|| (concordant - discordant) as f64 / d)
    }

    #[test]
    fn same_order_is_one_and_reversed_is_minus_one() {
        let mut same: Vec<(u64, u64)> = (0..1000).map(|i| (i, i * 3)).collect();
        assert_eq!(kendall_tau_b(&mut same), Some(1.0));
        let mut reversed: Vec<(u64, u64)> = (0..1000).map(|i| (i, 5000 - i)).collect();
        assert_eq!(kendall_tau_b(&mut reversed), Some(-1.0));
        assert_eq!(kendall_tau_b(&mut [(1, 1)]), None);
        assert_eq!(kendall_tau_b(&mut [(1, 1), (1, 2)]), None);
    }

    #[test]
    fn matches_the_definition_with_ties() {
        let mut rng = rand::rng();
        for n in [2usize, 3, 7, 50, 300] {
            for _ in 0..20 {
                let pairs: Vec<(u64, u64)> = (0..n)
                    .map(|_| (rng.random_range(0..20), rng.random_range(0..20)))
                    .collect();
                let want = brute_force(&pairs);
                let got = kendall_tau_b(&mut pairs.clone());
                match (want, got) {
                    (Some(w), Some(g)) => assert!((w - g).abs() < 1e-9, "{pairs:?}: {w} {g}"),
                    (w, g) => assert_eq!(w, g, "{pairs:?}"),
                }
            }
        }
    }

    #[test]
    fn independent_orders_score_near_zero() {
        let mut rng = rand::rng();
        let n = 20_000u64;
        let mut pairs: Vec<(u64, u64)> = (0..n).map(|i| (i, rng.random())).collect();
        let tau = kendall_tau_b(&mut pairs).expect("tau");
        // Under independence z is standard normal: |z| > 6 has probability ~2e-9.
        assert!(independence_z(tau, n).abs() < 6.0, "tau {tau}");
        let mut dependent: Vec<(u64, u64)> = (0..n)
            .map(|i| (i, i + rng.random_range(0..n / 10)))
            .collect();
        let tau = kendall_tau_b(&mut dependent).expect("tau");
        assert!(independence_z(tau, n) > 6.0, "tau {tau}");
    }
}
