// CPU an idle engine costs: two ranks connect and exchange a message (so that the rings, sockets
// and workers are all up), then the application thread sleeps while getrusage() measures what the
// process (its workers and monitor) burned. Run once per progress mode:
//
//   ORBITE_PROGRESS_MODE=event_driven orbite-run -n 2 idle_cpu [seconds]
//   ORBITE_PROGRESS_MODE=polling      orbite-run -n 2 idle_cpu [seconds]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <orbite/orbite.h>

namespace {

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int fail(const orbite::Status& st) {
  std::fprintf(stderr, "idle_cpu: %s\n", st.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  if (!(seconds > 0 && seconds < 3600)) {
    std::fprintf(stderr, "idle_cpu: expected a number of seconds in (0, 3600), got '%s'\n",
                 argv[1]);
    return 2;
  }
  auto boot = orbite::Bootstrap::from_env();
  if (!boot.ok()) return fail(boot.status());
  auto comm = orbite::Communicator::create(*boot);
  if (!comm.ok()) return fail(comm.status());
  const int peer = comm->rank() == 0 ? 1 : 0;
  if (comm->size() < 2)
    return fail(orbite::Status::error(orbite::Errc::InvalidArgument, "idle_cpu needs 2 ranks"));
  char out = 1;
  char in = 0;
  if (comm->rank() < 2) {
    auto r = comm->irecv(&in, 1, peer, 0);
    if (!r.ok()) return fail(r.status());
    if (auto st = comm->send(&out, 1, peer, 0, std::chrono::seconds(60)); !st.ok()) return fail(st);
    if (auto st = r->wait(std::chrono::seconds(60)); !st.ok()) return fail(st);
  }
  // Let the workers settle into their idle state, then measure.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double percent = 100.0 * (cpu_seconds() - cpu0) / wall;
  const char* mode =
      comm->config().progress_mode == orbite::ProgressMode::Polling ? "polling" : "event_driven";
  std::printf(
      "rank %d: progress_mode %s, idle engine %.2f%% of a core over %.1f s "
      "(workers %u, sleeps %llu)\n",
      comm->rank(), mode, percent, wall, comm->config().num_lanes,
      static_cast<unsigned long long>(comm->engine().stats().worker_idle_sleeps));
  return comm->store_barrier().ok() ? 0 : 1;
}
