//! The one pseudorandom generator of a run: SplitMix64 (Steele, Lea and Flood, 2014), seeded
//! by the run's seed and drawn from in event order, so a seed fixes every choice of the run.
//!
//! Nothing here reads the operating system's entropy. The continuous draws (`normal`,
//! `lognormal`) use `f64::ln`, `sqrt` and `cos`, which are deterministic for one build on one
//! platform: the same binary gives the same trace for the same seed.

/// SplitMix64: a 64-bit state advanced by a constant and mixed; passes BigCrush, one add and
/// three multiply-xorshifts per draw.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; `n = 0` gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `[low, high)`.
    pub fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Standard normal (Box-Muller, one of the pair).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Lognormal with the given median and shape `sigma` (the spread of its logarithm).
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    /// A new generator for a sub-stream, drawn from this one.
    pub fn fork(&mut self) -> Self {
        Self::new(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_draws_and_another_seed_others() {
        let draws = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..8).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = SplitMix64::new(1);
        for _ in 0..10_000 {
            let unit = rng.unit();
            assert!((0.0..1.0).contains(&unit));
            assert!(rng.below(7) < 7);
            assert!(rng.lognormal(5.0, 0.5) > 0.0);
        }
        assert_eq!(rng.below(0), 0);
    }

    #[test]
    fn the_lognormal_median_is_near_its_parameter() {
        let mut rng = SplitMix64::new(3);
        let mut draws: Vec<f64> = (0..20_001).map(|_| rng.lognormal(4.0, 0.6)).collect();
        draws.sort_by(f64::total_cmp);
        let median = draws[10_000];
        assert!((3.8..4.2).contains(&median), "median {median}");
    }
}
