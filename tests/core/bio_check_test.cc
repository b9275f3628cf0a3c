// What the core refuses at submission, as the kernel refuses to build or
// issue such a bio: a null buffer, more than BIO_MAX_VECS vectors, and
// buffers the device's DMA alignment does not allow. Each ends with inval,
// reaches no driver, and the queue keeps working.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

// Submits a bio over `vecs` at sector 0 and returns its status; the stub
// driver ends requests inline, so the bio has ended when this returns.
BlkStatus submit(Queue& q, ReqOp op, const std::vector<iovec>& vecs) {
  Bio b;
  b.op = op;
  b.vec = vecs.data();
  b.nr_vecs = static_cast<uint16_t>(vecs.size());
  for (const iovec& v : vecs) b.size += static_cast<uint32_t>(v.iov_len);
  int ends = 0;
  b.private_data = &ends;
  b.end_io = [](Bio* x) { ++*static_cast<int*>(x->private_data); };
  q.submit_bio(&b);
  EXPECT_EQ(ends, 1);
  return b.status;
}

struct AlignedBuf {
  // aligned_alloc wants a size that is a multiple of the alignment.
  explicit AlignedBuf(size_t n) : p(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
  ~AlignedBuf() { std::free(p); }
  uint8_t* p;
};

TEST(BioCheck, NullBufferIsRefused) {
  StubDriver d(StubDriver::Options{});
  EXPECT_EQ(submit(d.q(), ReqOp::write, {{nullptr, 4096}}), BlkStatus::inval);
  EXPECT_EQ(submit(d.q(), ReqOp::read, {{nullptr, 4096}}), BlkStatus::inval);
  EXPECT_EQ(d.nr_seen(), 0u);
}

TEST(BioCheck, MoreVectorsThanBioMaxVecsAreRefused) {
  StubDriver d(StubDriver::Options{});
  AlignedBuf buf(512 * (kBioMaxVecs + 1));
  std::vector<iovec> vecs;
  for (unsigned i = 0; i < kBioMaxVecs; i++) vecs.push_back({buf.p + 512 * i, 512});
  EXPECT_EQ(submit(d.q(), ReqOp::write, vecs), BlkStatus::ok) << "BIO_MAX_VECS itself is allowed";
  vecs.push_back({buf.p + 512 * kBioMaxVecs, 512});
  const size_t seen = d.nr_seen();
  EXPECT_EQ(submit(d.q(), ReqOp::write, vecs), BlkStatus::inval);
  EXPECT_EQ(d.nr_seen(), seen);
}

TEST(BioCheck, BuffersMisalignedForTheDeviceAreRefused) {
  StubDriver::Options o;
  o.dma_alignment = 511;
  StubDriver d(o);
  EXPECT_EQ(*d.q().attr("queue/dma_alignment"), "511");
  AlignedBuf buf(3 * 4096);
  EXPECT_EQ(submit(d.q(), ReqOp::write, {{buf.p + 512, 4096}}), BlkStatus::ok);
  EXPECT_EQ(submit(d.q(), ReqOp::write, {{buf.p + 8, 4096}}), BlkStatus::inval) << "address";
  EXPECT_EQ(submit(d.q(), ReqOp::read, {{buf.p, 100}, {buf.p + 1024, 412}}), BlkStatus::inval)
      << "a vector's length, though the total is one block";
  EXPECT_EQ(submit(d.q(), ReqOp::read, {{buf.p, 4096}}), BlkStatus::ok) << "the queue still works";
}

TEST(BioCheck, AnyAlignmentWhenTheDeviceHasNoRequirement) {
  StubDriver d(StubDriver::Options{});
  EXPECT_EQ(*d.q().attr("queue/dma_alignment"), "0");
  AlignedBuf buf(2 * 4096);
  EXPECT_EQ(submit(d.q(), ReqOp::write, {{buf.p + 3, 4096}}), BlkStatus::ok);
  EXPECT_EQ(submit(d.q(), ReqOp::write, {{buf.p, 100}, {buf.p + 200, 412}}), BlkStatus::ok);
}

TEST(BioCheck, ABadDmaAlignmentLimitIsRefusedAtCreation) {
  StubDriver::Options o;
  o.dma_alignment = 500;  // not 2^n - 1
  EXPECT_THROW(StubDriver d(o), std::runtime_error);
  o.dma_alignment = 8191;  // beyond a page
  EXPECT_THROW(StubDriver d2(o), std::runtime_error);
}

}  // namespace
}  // namespace blkmq::test
