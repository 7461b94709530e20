//! A TCP link's receive buffer: one contiguous byte area that the socket
//! is read into directly and the engine consumes from the front, so a byte
//! is copied once on its way from the kernel to the engine.

/// Bytes `data[head..tail]` wait to be consumed.
#[derive(Default)]
pub struct RxBuf {
    data: Vec<u8>,
    head: usize,
    tail: usize,
}

impl RxBuf {
    /// Unconsumed bytes.
    pub fn len(&self) -> usize {
        self.tail - self.head
    }

    /// A writable area of at least `min(want, 4096)` and at most `want`
    /// bytes after the waiting ones, made by moving them to the front or
    /// growing the buffer. Pass how much was written to `commit`.
    pub fn space(&mut self, want: usize) -> &mut [u8] {
        if self.data.len() - self.tail < want.min(4096) || self.data.len() - self.tail == 0 {
            if self.head > 0 {
                self.data.copy_within(self.head..self.tail, 0);
                self.tail -= self.head;
                self.head = 0;
            }
            if self.data.len() - self.tail < want {
                let grown = (self.tail + want).next_power_of_two().max(64 * 1024);
                self.data.resize(grown, 0);
            }
        }
        let end = self.data.len().min(self.tail + want);
        &mut self.data[self.tail..end]
    }

    /// Marks `n` bytes of the last `space` as received.
    pub fn commit(&mut self, n: usize) {
        self.tail += n;
        debug_assert!(self.tail <= self.data.len());
    }

    /// The first `n` waiting bytes (n <= len).
    pub fn front(&self, n: usize) -> &[u8] {
        &self.data[self.head..self.head + n]
    }

    /// Drops the first `n` waiting bytes.
    pub fn consume(&mut self, n: usize) {
        self.head += n;
        debug_assert!(self.head <= self.tail);
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_out_in_order_across_moves_and_growth() {
        let mut b = RxBuf::default();
        let mut next_in = 0u8;
        let mut next_out = 0u8;
        for round in 0..200usize {
            let want = 1 + (round * 7919) % 100_000;
            let s = b.space(want);
            assert!(!s.is_empty() && s.len() <= want);
            let n = s.len().min(1 + round * 31 % 50_000);
            for x in &mut s[..n] {
                *x = next_in;
                next_in = next_in.wrapping_add(1);
            }
            b.commit(n);
            let take = (b.len() * (round % 3)) / 2;
            for &x in b.front(take) {
                assert_eq!(x, next_out);
                next_out = next_out.wrapping_add(1);
            }
            b.consume(take);
        }
    }
}
