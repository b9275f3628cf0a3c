// The sysfs-like tree of blkmq/sysfs_tree.h. Only the public Queue API is
// used: this layer sees what a program linking the library sees.
#include "blkmq/sysfs_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace blkmq {
namespace {

namespace fs = std::filesystem;

// How often `stat` and `inflight` are rewritten.
constexpr auto kFastRefresh = std::chrono::milliseconds(50);

Status errno_status(const std::string& what) { return Status::error(errno, what + ": " + std::strerror(errno)); }

// mkdir -p with every folder made owner-only (0700), not by the umask.
Status make_dirs(const std::string& path) {
  std::string at;
  for (const auto& part : fs::path(path)) {
    at = at.empty() ? part.string() : (fs::path(at) / part).string();
    if (part == "/" || part.empty()) continue;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) return errno_status("sysfs tree: " + at);
  }
  return Status::OK();
}

std::string dev_link(const std::string& dir, const Queue& q) {
  return dir + "/dev/block/" + std::to_string(Queue::kDevMajor) + ":" + std::to_string(q.dev_minor());
}

}  // namespace

struct SysfsTree::Impl {
  ~Impl();
  Status add(Queue& q);
  void remove(Queue& q);
  void run();
  // Writes q's files: every attribute, or only the fast-changing ones.
  Status write_device(Queue& q, bool all);
  Status write_file(const std::string& path, const std::string& text);

  std::string dir_;
  unsigned refresh_ms_ = 1000;
  std::mutex lock_;  // queues_, and each refresh
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<Queue*> queues_;
  std::map<const Queue*, std::vector<std::string>> written_;  // the files of each, at the last full write
  std::thread thread_;
};

SysfsTree::SysfsTree(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SysfsTree::~SysfsTree() = default;
Status SysfsTree::add(Queue& q) { return impl_->add(q); }
void SysfsTree::remove(Queue& q) { impl_->remove(q); }
const std::string& SysfsTree::dir() const { return impl_->dir_; }

Result<std::unique_ptr<SysfsTree>> SysfsTree::open(const std::string& dir, unsigned refresh_ms) {
  if (dir.empty()) return Status::invalid("sysfs tree: expected a directory");
  for (const std::string& d : {dir, dir + "/block", dir + "/dev", dir + "/dev/block"})
    if (Status st = make_dirs(d); !st) return st;
  auto impl = std::make_unique<Impl>();
  impl->dir_ = dir;
  impl->refresh_ms_ = std::max(refresh_ms, 1u);
  impl->thread_ = std::thread([p = impl.get()] { p->run(); });
  return std::unique_ptr<SysfsTree>(new SysfsTree(std::move(impl)));
}

SysfsTree::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> l(lock_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  while (!queues_.empty()) remove(*queues_.back());
}

Status SysfsTree::Impl::add(Queue& q) {
  std::lock_guard<std::mutex> l(lock_);
  for (const Queue* e : queues_)
    if (e->name() == q.name()) return Status::error(EEXIST, "sysfs tree: a device '" + q.name() + "' is there");
  if (Status st = write_device(q, true); !st) return st;
  const std::string link = dev_link(dir_, q);
  ::unlink(link.c_str());
  if (::symlink(("../../block/" + q.name()).c_str(), link.c_str()) != 0) return errno_status("sysfs tree: " + link);
  queues_.push_back(&q);
  return Status::OK();
}

void SysfsTree::Impl::remove(Queue& q) {
  std::lock_guard<std::mutex> l(lock_);
  auto it = std::find(queues_.begin(), queues_.end(), &q);
  if (it == queues_.end()) return;
  queues_.erase(it);
  written_.erase(&q);
  std::error_code ec;
  fs::remove(dev_link(dir_, q), ec);
  fs::remove_all(dir_ + "/block/" + q.name(), ec);
}

Status SysfsTree::Impl::write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status("sysfs tree: " + tmp);
  const std::string body = text.empty() || text.back() != '\n' ? text + "\n" : text;
  const bool ok = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = errno_status("sysfs tree: " + path);
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::OK();
}

// Every attribute the queue lists (its set changes with the scheduler:
// queue/iosched/* and with the hw queues: mq/<n>/*), or just the two that
// move with every I/O. The caller holds lock_.
Status SysfsTree::Impl::write_device(Queue& q, bool all) {
  const std::string base = dir_ + "/block/" + q.name() + "/";
  const std::vector<std::string> names = all ? q.attr_names() : std::vector<std::string>{"stat", "inflight"};
  for (const std::string& name : names) {
    Result<std::string> v = q.attr(name);
    if (!v) continue;  // e.g. a scheduler switched away between the list and the read
    const std::string path = base + name;
    if (all)
      if (Status st = make_dirs(fs::path(path).parent_path().string()); !st) return st;
    if (Status st = write_file(path, *v); !st) return st;
  }
  if (!all) return Status::OK();
  // A scheduler switch or a new hw queue count retires attributes: their
  // files go, as the kernel's do.
  std::vector<std::string>& old = written_[&q];
  for (const std::string& name : old)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::error_code ec;
      fs::remove(base + name, ec);
    }
  old = names;
  return Status::OK();
}

void SysfsTree::Impl::run() {
  std::unique_lock<std::mutex> l(lock_);
  auto next_all = std::chrono::steady_clock::now() + std::chrono::milliseconds(refresh_ms_);
  while (!stop_) {
    wake_.wait_for(l, kFastRefresh, [&] { return stop_; });
    if (stop_) break;
    const bool all = std::chrono::steady_clock::now() >= next_all;
    if (all) next_all += std::chrono::milliseconds(refresh_ms_);
    // A failed write (a full disk) is tried again at the next refresh.
    for (Queue* q : queues_) (void)write_device(*q, all);
  }
}

}  // namespace blkmq
