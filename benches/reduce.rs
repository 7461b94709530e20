//! Reduce kernels against a copy of the same bytes (`copy::copy`, the
//! library's memcpy, which sidesteps glibc's slow `rep movsb` case), in cache
//! (256 KiB) and out of cache (64 MiB); and the shared-memory ring between
//! two threads.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrocoll::dtype::ElemType;
use ferrocoll::reduce::{kernel, Op};
use ferrocoll::transport::shm::Segment;
use std::hint::black_box;

fn kernels(c: &mut Criterion) {
    for bytes in [256 << 10, 64 << 20] {
        let mut g = c.benchmark_group(format!("reduce_{}KiB", bytes >> 10));
        g.throughput(Throughput::Bytes(bytes as u64));
        g.sample_size(10);
        // One allocation, both buffers page-aligned and 2 KiB apart modulo
        // 4 KiB: where two separate vectors land decided between runs
        // whether `copy` met its slow skew and the kernels 4 KiB aliasing
        // (memcpy 58-61 or 114-119 GiB/s, f32 MAX 65 or 94, one binary).
        let mut arena = vec![0u8; 2 * bytes + 3 * 4096];
        let base = arena.as_ptr().align_offset(4096);
        let (src, dst) = arena[base..].split_at_mut(bytes + 2048);
        src.fill(1);
        let src = &src[..bytes];
        let dst = &mut dst[..bytes];
        dst.fill(2);
        g.bench_function("memcpy", |b| {
            b.iter(|| ferrocoll::copy::copy(dst, black_box(src)))
        });
        for ty in [
            ElemType::F32,
            ElemType::F64,
            ElemType::I32,
            ElemType::I64,
            ElemType::F16,
            ElemType::Bf16,
        ] {
            for op in [Op::Sum, Op::Max, Op::Min] {
                let k = kernel(op, ty).expect("kernel exists");
                let n = bytes / ty.extent() * ty.extent();
                g.bench_with_input(
                    BenchmarkId::new(format!("{op:?}"), format!("{ty:?}")),
                    &n,
                    |b, &n| b.iter(|| k(black_box(&src[..n]), &mut dst[..n])),
                );
            }
        }
        g.finish();
    }
}

fn shm_ring(c: &mut Criterion) {
    let mut g = c.benchmark_group("shm_ring");
    g.sample_size(10);
    for bytes in [8usize, 64 << 10, 8 << 20] {
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_with_input(BenchmarkId::from_parameter(bytes), &bytes, |b, &bytes| {
            let seg = Segment::anonymous(2, 256 << 10).unwrap();
            let data = vec![7u8; bytes];
            let mut out = vec![0u8; bytes];
            b.iter(|| {
                let (tx, rx) = (seg.ring(0, 1), seg.ring(0, 1));
                let data = &data;
                std::thread::scope(|s| {
                    s.spawn(move || {
                        let mut off = 0;
                        while off < bytes {
                            off += tx.write_some(&data[off..], false);
                        }
                    });
                    let mut off = 0;
                    while off < bytes {
                        off += rx.read_some(&mut out[off..]);
                    }
                });
            });
        });
    }
    g.finish();
}

criterion_group!(benches, kernels, shm_ring);
criterion_main!(benches);
