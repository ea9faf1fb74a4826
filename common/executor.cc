#include "common/executor.h"

#include <chrono>
#include <thread>
#include <vector>

#include "boost/asio/bind_executor.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/thread_pool.hpp"

namespace profctl {

struct AsioExecutor::Impl {
  boost::asio::io_context io;
  boost::asio::strand<boost::asio::io_context::executor_type> strand{io.get_executor()};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::vector<std::thread> threads;
};

AsioExecutor::AsioExecutor(const Clock* clock, int threads)
    : clock_(clock), impl_(std::make_unique<Impl>()) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    impl_->threads.emplace_back([io = &impl_->io] { io->run(); });
  }
}

AsioExecutor::~AsioExecutor() {
  impl_->work.reset();
  impl_->io.stop();  // pending timers would otherwise keep run() alive until they fire
  for (std::thread& t : impl_->threads) t.join();
}

namespace {
// The executor whose task this thread runs now, if any.
thread_local const Executor* current_task_executor = nullptr;
}  // namespace

bool Executor::RunsCurrentTask() const { return current_task_executor == this; }

Executor::TaskScope::TaskScope(const Executor* executor) : outer_(current_task_executor) {
  current_task_executor = executor;
}

Executor::TaskScope::~TaskScope() { current_task_executor = outer_; }

void AsioExecutor::Post(Task task) {
  // Asio wants copyable handlers in some paths: hold the move-only task behind a shared_ptr.
  auto holder = std::make_shared<Task>(std::move(task));
  boost::asio::post(impl_->strand, [this, holder] {
    const TaskScope scope(this);
    std::move (*holder)();
  });
}

void AsioExecutor::PostAt(int64_t deadline_mono_ns, Task task) {
  const int64_t delay_ns = deadline_mono_ns - clock_->MonoNs();
  if (delay_ns <= 0) {
    Post(std::move(task));
    return;
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(impl_->io);
  timer->expires_after(std::chrono::nanoseconds(delay_ns));
  auto holder = std::make_shared<Task>(std::move(task));
  timer->async_wait(boost::asio::bind_executor(
      impl_->strand, [this, timer, holder](const boost::system::error_code& ec) {
        if (ec) return;
        const TaskScope scope(this);
        std::move (*holder)();
      }));
}

struct ThreadWorkPool::Impl {
  explicit Impl(int threads) : pool(static_cast<size_t>(std::max(1, threads))) {}
  boost::asio::thread_pool pool;
};

ThreadWorkPool::ThreadWorkPool(int threads) : impl_(std::make_unique<Impl>(threads)) {}

ThreadWorkPool::~ThreadWorkPool() { impl_->pool.join(); }

void ThreadWorkPool::Submit(Executor::Task job) {
  auto holder = std::make_shared<Executor::Task>(std::move(job));
  boost::asio::post(impl_->pool, [holder] { std::move (*holder)(); });
}

}  // namespace profctl
