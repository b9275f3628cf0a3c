// Verified random transfers through any device's queue, shared by the
// driver tests: writes of random extents (some split into several
// segments) with a model of the device, then a read-back of all of it.
#pragma once

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"

namespace blkmq::devtest {

// An asynchronous I/O over a caller's buffer, split into up to three
// segments so requests carry several iovecs.
struct SegSlot {
  Bio bio;
  iovec iov[3]{};

  void prep(ReqOp op, uint64_t off, uint32_t len, unsigned char* buf, Waiter* w, uint32_t flags = 0,
            uint32_t seg = 0) {
    bio = devtest::bio_at(op, off, len, flags);
    if (op_has_data(op)) {
      // Segments on `seg`-byte boundaries (0: one segment).
      uint16_t n = 0;
      uint32_t done = 0;
      while (done < len) {
        uint32_t chunk = (seg && n < 2) ? std::min(seg, len - done) : len - done;
        iov[n++] = {buf + done, chunk};
        done += chunk;
      }
      bio.vec = iov;
      bio.nr_vecs = n;
    }
    bio.end_io = waiter_end_io;
    bio.private_data = w;
  }
};

inline BlkStatus submit_wait(Queue& q, ReqOp op, uint64_t off, uint32_t len, unsigned char* buf,
                      uint32_t flags = 0) {
  Waiter w;
  SegSlot s;
  s.prep(op, off, len, buf, &w, flags);
  q.submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  return s.bio.status;
}

// Writes random extents (512 B .. 1 MiB, some multi-segment) with up to
// `depth` in flight, keeps a model, then reads everything back.
inline void random_verify(Queue& q, uint64_t dev_size, unsigned bs, int nr_ios, unsigned seed) {
  std::mt19937_64 rng(seed);
  AlignedBuf model(dev_size);
  std::memset(model.data, 0, dev_size);
  constexpr int kDepth = 16;
  constexpr uint32_t kMaxLen = 1u << 20;
  std::vector<std::unique_ptr<AlignedBuf>> bufs;
  for (int i = 0; i < kDepth; i++) bufs.push_back(std::make_unique<AlignedBuf>(kMaxLen));
  const uint64_t blocks = dev_size / bs;
  for (int done = 0; done < nr_ios; done += kDepth) {
    // Disjoint extents within one round so the model is unambiguous.
    Waiter w;
    std::vector<SegSlot> slots(kDepth);
    std::vector<std::pair<uint64_t, uint32_t>> used;
    int issued = 0;
    for (int i = 0; i < kDepth; i++) {
      uint32_t len_blocks = 1u << (rng() % 12);  // 1 .. 2048 blocks
      uint32_t len = std::min<uint64_t>(uint64_t{len_blocks} * bs, kMaxLen);
      len = std::max(bs, len - len % bs);
      uint64_t off = (rng() % (blocks - len / bs + 1)) * bs;
      bool overlaps = std::any_of(used.begin(), used.end(), [&](auto& e) {
        return off < e.first + e.second && e.first < off + len;
      });
      if (overlaps) continue;
      used.emplace_back(off, len);
      fill_pattern(bufs[i]->data, len, rng());
      std::memcpy(model.data + off, bufs[i]->data, len);
      slots[i].prep(ReqOp::write, off, len, bufs[i]->data, &w, 0, (i % 3 == 0) ? bs : 0);
      q.submit_bio(&slots[i].bio);
      issued++;
    }
    ASSERT_TRUE(w.wait(issued));
    ASSERT_EQ(w.errors(), 0) << blk_status_name(w.last_error());
  }
  AlignedBuf back(kMaxLen);
  for (uint64_t off = 0; off < dev_size; off += kMaxLen) {
    uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(kMaxLen, dev_size - off));
    ASSERT_EQ(submit_wait(q, ReqOp::read, off, len, back.data), BlkStatus::ok);
    ASSERT_EQ(std::memcmp(back.data, model.data + off, len), 0) << "mismatch in extent at " << off;
  }
}

}  // namespace blkmq::devtest
