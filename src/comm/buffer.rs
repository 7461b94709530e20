//! A caller's buffer held by a pending request. Non-blocking operations
//! outlive the call that posted them, so the engine keeps a raw pointer; the
//! only dereferences of it are here.

/// A byte range owned by the caller until its request completes.
#[derive(Clone, Copy, Debug)]
pub struct RawBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the caller of `RawBuf::new` promises exclusive use by the request,
// which only the engine's thread touches.
unsafe impl Send for RawBuf {}

impl RawBuf {
    /// An empty buffer (zero-length messages, `MPI_PROC_NULL`).
    pub const EMPTY: RawBuf = RawBuf {
        ptr: std::ptr::null_mut(),
        len: 0,
    };

    /// Wraps `len` bytes at `ptr`.
    ///
    /// # Safety
    /// Unless `len == 0`, `ptr` must be valid for reads (send buffers) or
    /// reads and writes (receive buffers) of `len` bytes until the request
    /// using it completes, and nothing else may write it meanwhile.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> RawBuf {
        RawBuf { ptr, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes from `off` on (send side).
    pub fn tail(&self, off: usize) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        assert!(off <= self.len);
        // SAFETY: `new`'s contract makes [ptr, ptr+len) readable while the
        // request is pending, which is whenever the engine calls this.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), self.len - off) }
    }

    /// Copies `src` into the buffer at `off` (receive side).
    pub fn write_at(&self, off: usize, src: &[u8]) {
        if src.is_empty() {
            return;
        }
        assert!(off + src.len() <= self.len);
        // SAFETY: `new`'s contract makes the range writable and unaliased;
        // the assert keeps the slice inside it.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), src.len()) };
        crate::copy::copy(dst, src);
    }

    /// Lets `fill` write up to `len` bytes into the buffer at `off`
    /// (receive side, e.g. a socket read); returns what `fill` returns,
    /// the bytes it wrote.
    #[inline]
    pub fn fill_at(&self, off: usize, len: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> usize {
        if len == 0 {
            return 0;
        }
        assert!(off + len <= self.len);
        // SAFETY: `new`'s contract makes the range writable and unaliased;
        // the assert keeps the slice inside it.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) };
        let n = fill(dst);
        assert!(n <= len);
        n
    }

    /// `len` bytes at `off` as a slice, for a part of a pending receive
    /// that has already landed.
    ///
    /// # Safety
    /// Nothing may write `[off, off + len)` while the slice lives: the
    /// engine must be done writing that range (it writes a receive in
    /// order, so bytes below what has landed are final).
    pub unsafe fn landed_mut<'a>(self, off: usize, len: usize) -> &'a mut [u8] {
        if len == 0 {
            return &mut [];
        }
        assert!(off + len <= self.len);
        // SAFETY: inside the buffer (asserted); the caller promises no
        // other writer for the slice's life.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}
