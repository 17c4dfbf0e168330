//! A seeded pseudorandom permutation of `0..n`, computed one index at a time.
//!
//! The `random` queue policy shuffles the pre-queue once at on-sale. Rather than moving two
//! million account ids around (and doing it again in every backend: a Redis queue cannot
//! shuffle a list without blocking), the shuffle is a keyed bijection: join index `i` of the
//! pre-queue goes to position `permute(i) + 1`. Any node that knows `n` (the pre-queue length
//! when the queue opened) and the seed computes any account's place in O(1), with no shared
//! list at all. The seed and `n` are logged when the queue opens, so the order can be
//! replayed and audited.
//!
//! The bijection is a balanced Feistel network over the smallest even power of two `>= n`
//! (six rounds, a splitmix64 round function keyed by the seed and the round), restricted to
//! `0..n` by cycle walking: apply the network until the value falls inside `0..n`. A Feistel
//! network is a bijection whatever its round function, and cycle walking keeps it one on the
//! subset; the domain is at most `4n`, so on average fewer than four applications are needed.

/// Rounds of the Feistel network. Four make a strong pseudorandom permutation when the round
/// function is pseudorandom (Luby–Rackoff); six give margin for a fast, non-cryptographic one.
pub const FEISTEL_ROUNDS: u64 = 6;

/// The permutation of `0..n` for one seed. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permutation {
    n: u64,
    seed: u64,
    half_bits: u32,
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Self {
        // Smallest even number of bits whose domain covers 0..n (at least 2 bits).
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        Self { n, seed, half_bits }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Where index `i` goes. `i` must be below `n`; larger values are returned unchanged.
    pub fn apply(&self, i: u64) -> u64 {
        if i >= self.n || self.n < 2 {
            return i;
        }
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let mut left = (x >> self.half_bits) & mask;
        let mut right = x & mask;
        for round in 0..FEISTEL_ROUNDS {
            let f =
                mix(self.seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ right.rotate_left(17))
                    & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }
}

/// The splitmix64 finalizer: a well-mixed 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(n: u64, seed: u64) -> Vec<u64> {
        let p = Permutation::new(n, seed);
        (0..n).map(|i| p.apply(i)).collect()
    }

    #[test]
    fn is_a_permutation_for_every_small_length() {
        for n in 0..300 {
            for seed in [0, 1, 42, u64::MAX] {
                let mut seen = image(n, seed);
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n={n} seed={seed}");
            }
        }
    }

    #[test]
    fn is_a_permutation_of_a_large_queue() {
        let n = 1_000_003;
        let mut seen = vec![false; n as usize];
        let p = Permutation::new(n, 7);
        for i in 0..n {
            let j = p.apply(i) as usize;
            assert!(!seen[j], "{j} hit twice");
            seen[j] = true;
        }
    }

    #[test]
    fn differs_by_seed_and_repeats_with_the_same_seed() {
        assert_eq!(image(1_000, 5), image(1_000, 5));
        assert_ne!(image(1_000, 5), image(1_000, 6));
        assert_ne!(image(1_000, 5), (0..1_000).collect::<Vec<_>>());
    }

    #[test]
    fn spreads_early_joiners_over_the_whole_queue() {
        // Arriving first buys nothing: the first tenth of the pre-queue lands roughly evenly
        // across the ten tenths of the shuffled order.
        let n = 100_000;
        let p = Permutation::new(n, 99);
        let mut deciles = [0u64; 10];
        for i in 0..n / 10 {
            deciles[(p.apply(i) * 10 / n) as usize] += 1;
        }
        for count in deciles {
            assert!((700..1_300).contains(&count), "{deciles:?}");
        }
    }
}
