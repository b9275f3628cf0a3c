#include "reproduce/experiment.h"

#include <cstdio>
#include <sstream>

#include "reproduce/metrics.h"

namespace repro {

const char* const kSeed002File = "seed002-backing.img";

namespace {

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> v;
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Names the rows on the chart, in order (RowDef::chart).
void set_chart_names(Experiment* e, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size() && i < e->rows.size(); i++) e->rows[i].chart = names[i];
}

// Seed 000: the fio job of the seed (io_uring, 4k randread, one job per
// device); iodepth_batch_submit=1 leaves every bio unplugged, as io_uring's
// submissions of at most two are.
Experiment seed000() {
  Experiment e;
  e.id = "000";
  e.title = "blk-mq: run the hw queue synchronously for unplugged scheduler inserts";
  e.attr = "queue/sched_insert_run";
  e.before = "async";
  e.after = "sync";
  e.common = {"--attr", "queue/submit_plug=none", "--name=seed000", "--rw=randread", "--bs=4k",
              "--iodepth_batch_submit=1", "--group_reporting"};
  const std::vector<std::string> m = {key::kIops, key::kCtxPerIo, key::kCpuUsPerIo};
  const std::string kblockd =
      "a kblockd run here is a futex wake of another thread, where the kernel's kworker preempts the "
      "submitter on its own CPU; the size of the loss depends on where the two threads run on 2 CPUs";
  e.rows = {
      {"null_blk, 1 queue, mq-deadline, qd16",
       split("--driver=null --submit_queues=1 --irqmode=1 --scheduler=mq-deadline --iodepth=16"), m,
       {{key::kIops, 193e3, 289e3}}, kblockd},
      {"null_blk, 1 queue, none, qd16", split("--driver=null --submit_queues=1 --irqmode=1 --scheduler=none --iodepth=16"),
       m, {{key::kIops, 354e3, 356e3}}, "no scheduler: the attribute is not on this path, as in the seed"},
      {"null_blk, 4 queues, none, qd1", split("--driver=null --submit_queues=4 --irqmode=1 --scheduler=none --iodepth=1"),
       m, {{key::kIops, 356e3, 358e3}}, "no scheduler: the attribute is not on this path, as in the seed"},
      {"ublk null target, 1 queue, mq-deadline, qd16",
       split("--driver=ublk --target=null --nr_hw_queues=1 --scheduler=mq-deadline --iodepth=16"), m,
       {{key::kIops, 113e3, 265e3}}, kblockd},
      {"ublk null target, 4 x 1-queue devices, qd16",
       split("--driver=ublk --target=null --nr_hw_queues=1 --scheduler=mq-deadline --iodepth=16 --ndevices=4 "
             "--numjobs=4"),
       m, {{key::kIops, 290e3, 852e3}},
       "four jobs, four server threads and kblockd share 2 CPUs here (the seed had 16), so the synchronous "
       "case saturates the machine too and the gap is smaller"},
  };
  set_chart_names(&e, {"null, mq-deadline, qd16", "null, none, qd16", "null, 4 queues, qd1", "ublk null, mq-deadline",
                       "ublk null, 4 devices"});
  e.notes = {"before = async (kblockd runs the hw queue after an unplugged scheduler insert, the kernel since "
             "9cbbac29d752); after = sync (the submitter runs it, the seed). queue/submit_plug=none in both.",
             "One job per device, io_uring-style submission of one bio at a time (never plugged)."};
  return e;
}

// Seed 001: the megaraid RAID-0 of 8 SSDs is a scsi host with host-wide
// tags, a per-LUN budget and an irq thread completing after an SSD-like
// latency; single queue, no scheduler possible (BLK_MQ_F_NO_SCHED).
Experiment seed001() {
  Experiment e;
  e.id = "001";
  e.title = "bypass the scheduler (issue directly) when no scheduler is set";
  e.attr = "queue/plug_direct_issue";
  e.before = "0";
  e.after = "1";
  e.common = split("--driver=scsi --no_sched=1 --nr_hw_queues=1 --host_tagset=1 --can_queue=1024 --queue_depth=256 "
                   "--latency_us=20 --name=seed001 --rw=randread --bs=4k --iodepth=32 --iodepth_batch_submit=8 "
                   "--iodepth_batch_complete=8 --numjobs=2 --group_reporting");
  e.rows = {
      {"scsi host, 1 volume for the RAID-0 of 8 SSDs, 2 jobs, plugged batches of 8", {},
       {key::kIops, key::kCpuPct, key::kCpuUsPerIo, key::kCtxPerIo},
       {{key::kIops, 840e3, 1066e3}, {key::kCpuPct, 11, 6}},
       "the seed's gain is the software-queue lock and insert it avoids, contended by many submitting CPUs; "
       "with 2 CPUs that lock is rarely contended, so the difference is the per-I/O insert cost only"},
  };
  set_chart_names(&e, {"scsi RAID-0, 2 jobs"});
  e.notes = {"before = 0 (a plugged request goes through the software queue and dispatch); after = 1 (issued "
             "directly on a no-scheduler single-queue tag set, the seed).",
             "The seed's CPU is the machine's utilisation (11 % -> 6 % of its CPUs); here CPU % is all "
             "blkmq and job threads' CPU time over run time and CPU count."};
  return e;
}

// Seed 002: tcm_loop + tcmu with a file backstore completes from a worker
// thread; the ublk loop target's server thread does the same.
Experiment seed002(const Scale& s) {
  Experiment e;
  e.id = "002";
  e.title = "blk-mq: complete request locally if not in interrupt context";
  e.attr = "queue/task_completion";
  e.before = "softirq";
  e.after = "local";
  char size[32];
  std::snprintf(size, sizeof size, "--size=%llu", static_cast<unsigned long long>(s.file_size));
  e.common = {"--driver=ublk", "--target=loop", "--filename=" + s.scratch_dir + "/" + kSeed002File, size,
              "--name=seed002", "--ioengine=libaio", "--rw=randwrite", "--bs=128k", "--iodepth=32"};
  const std::vector<std::string> m = {key::kIops,  key::kBwMib,    key::kSlatUs,    key::kClatUs,
                                      key::kLatUs, key::kCtxPerIo, key::kCpuUsPerIo};
  const std::vector<SeedValue> seed = {{key::kIops, 15.7e3, 16.8e3},
                                       {key::kBwMib, 1966, 2101},
                                       {key::kSlatUs, 8.69, 14.12},
                                       {key::kClatUs, 498.89, 460.78},
                                       {key::kLatUs, 507.70, 475.04}};
  e.rows = {
      {"ublk loop over a file on the root disk, O_DIRECT (device-bound), 128k randwrite, qd32", {"--direct=1"}, m,
       seed,
       "on 2 CPUs every ksoftirqd wake-up (see ctx/IO) takes a CPU from the submitter or the server thread, "
       "and some land inside submission, so our slat falls with local completion where the seed's rose "
       "(8.7 -> 14.1 µs, a rise the seed does not explain); the root disk sets the rate, so IOPS moves "
       "less than ctx/IO"},
      {"ublk loop over the same file through the page cache (tcmu's file backstore), 128k randwrite, qd32",
       {"--direct=0"}, m, seed,
       "the same preemption of submission by ksoftirqd makes our slat fall where the seed's rose; IOPS is set "
       "by io_uring's io-wq workers copying each 128k buffered write into the page cache (the server thread "
       "used 57 % of a CPU in a 2 s run), so the completion path moves it little, as in the seed"},
  };
  set_chart_names(&e, {"ublk loop, O_DIRECT", "ublk loop, page cache"});
  e.notes = {"before = softirq (a completion from task context raises BLOCK_SOFTIRQ and wakes ksoftirqd); after "
             "= local (it completes in place, the seed).",
             "The backing file is laid out (allocated, as fio does) by the first run, in the scratch directory "
             "on the root disk, and removed at the end. The seed's own fio job ran with --direct=1 on the "
             "tcm_loop disk; here --direct picks how the loop target opens its file."};
  return e;
}

// Seed 003: the seed's own fio command line, verbatim, on a null device.
constexpr const char* kSeed003Fio =
    "--bs=512 --group_reporting=1 --gtod_reduce=1 --invalidate=1 --ioengine=io_uring --norandommap --runtime=60 "
    "--rw=randread --thread --time_based=1 --buffered=0 --fixedbufs=1 --numjobs=32 --iodepth=4 "
    "--iodepth_batch_submit=4 --iodepth_batch_complete=4 --name=/dev/nvme0n1 --filename=/dev/nvme0n1";

Experiment seed003() {
  Experiment e;
  e.id = "003";
  e.title = "block/bfq: use separate insertion lists";
  e.attr = "queue/iosched/insert_lists";
  e.before = "locked";
  e.after = "split";
  const std::vector<std::string> fio = split(kSeed003Fio);
  const std::vector<std::string> m = {key::kIops, key::kSysPct, key::kUsrPct, key::kLockPct,
                                      key::kLockWaitNsPerIo, key::kCtxPerIo, key::kCpuUsPerIo};
  const std::string cpus =
      "32 submitters on 2 CPUs: at most two of them run at once, where the seed had 32 CPUs spinning on the "
      "lock, so the contention split removes (and the IOPS it buys) is bounded by the CPU count here; lock "
      "contention % and lock wait ns/IO show what split changes";
  const std::string writers =
      "8 sequential writers on nr_requests=16 with a slow device: requests wait in the scheduler, so "
      "insert-time merging decides the IOPS; split must merge as much as locked";
  e.rows = {
      {"null, bfq: the seed's fio line (512 B randread, 32 jobs x qd4, batches of 4)",
       cat(split("--driver=null --irqmode=1 --scheduler=bfq"), fio), m,
       {{key::kIops, 567e3, 1550e3}, {key::kSysPct, 86.04, 14.49}, {key::kUsrPct, 0.18, 1.34},
        {key::kLockPct, 96, 30}},
       cpus},
      {"null, mq-deadline: the seed's fio line", cat(split("--driver=null --irqmode=1 --scheduler=mq-deadline"), fio),
       m, {}, cpus},
      {"null, mq-deadline: 8 sequential 4k writers, nr_requests=16, 4 tags x 10 µs",
       split("--driver=null --scheduler=mq-deadline --irqmode=2 --completion_nsec=10000 --hw_queue_depth=4 "
             "--attr queue/nr_requests=16 --name=seqwrite --rw=write --bs=4k --numjobs=8 --iodepth=16 "
             "--offset_increment=4g --size=4g --group_reporting"),
       {key::kIops, key::kWriteMergePct, key::kLockPct, key::kCtxPerIo, key::kCpuUsPerIo}, {}, writers},
      {"null, bfq: 8 sequential 4k writers, nr_requests=16, 4 tags x 10 µs",
       split("--driver=null --scheduler=bfq --irqmode=2 --completion_nsec=10000 --hw_queue_depth=4 "
             "--attr queue/nr_requests=16 --name=seqwrite --rw=write --bs=4k --numjobs=8 --iodepth=16 "
             "--offset_increment=4g --size=4g --group_reporting"),
       {key::kIops, key::kWriteMergePct, key::kLockPct, key::kCtxPerIo, key::kCpuUsPerIo}, {}, writers},
  };
  set_chart_names(&e, {"null bfq, seed's fio line", "null mq-deadline, seed's fio", "null mq-deadline, 8 writers",
                       "null bfq, 8 writers"});
  e.notes = {"before = locked (every insert takes the scheduler lock, the kernel before the seed); after = split "
             "(inserts park on light lists when the lock is busy, the seed).",
             "Lock contention is blkmq's own count on the scheduler's main lock (queue/iosched/lock_stat): the "
             "share of acquisitions that had to wait, and the wait per I/O. The seed's 96 % / ~30 % came from "
             "the kernel's lock statistics on 32 CPUs.",
             "The sequential-writer rows are where the kernel's first version of this patch regressed (-73 % on "
             "the 0-day robot: merges moved from insert to dispatch time). blkmq's split mode keeps every "
             "insert-time merge, so their merge share should match.",
             "blkmq runs in user space, so the job threads' block-layer time is usr where the kernel's is sys: "
             "set the seed's sys % beside our usr %.",
             "With 32 threads on 2 CPUs a waiter mostly waits for a holder that was preempted: few acquisitions "
             "wait, but each waits long (lock wait ns/IO sums the wall time of every waiter).",
             std::string("The seed's command line, given verbatim after the device options: ") + kSeed003Fio};
  return e;
}

}  // namespace

std::vector<Experiment> seed_experiments(const Scale& s) { return {seed000(), seed001(), seed002(s), seed003()}; }

std::vector<std::string> run_args(const Experiment& e, const RowDef& row, const std::string& value,
                                  double runtime_s) {
  std::vector<std::string> a = {"bench"};
  a.insert(a.end(), e.common.begin(), e.common.end());
  a.insert(a.end(), row.args.begin(), row.args.end());
  a.push_back("--attr");
  a.push_back(e.attr + "=" + value);
  if (runtime_s > 0) {
    char rt[32];
    std::snprintf(rt, sizeof rt, "--runtime=%.0fms", runtime_s * 1000);
    a.push_back(rt);
    a.push_back("--time_based");
  }
  return a;
}

}  // namespace repro
