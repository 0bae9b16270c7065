// Unit tests of weftrun's pieces: host lists, timeline paths, quoting, MPI translation, binding.
#include <gtest/gtest.h>

#include "launcher/binding.h"
#include "launcher/doctor.h"
#include "launcher/mpi_command.h"
#include "launcher/options.h"
#include "runtime/base/error.h"

namespace weft::launcher {
namespace {

// ---- weft-doctor on made-up dumps ----------------------------------------------------------------

// One rank's dump of the world communicator: ops given as {seq, state, waiting_on (-1: none)}, all
// all-reduces of 256 float32 (sum) unless `count` says otherwise for the last one.
nlohmann::json rank_dump(int rank, int size, std::vector<std::tuple<int, const char*, int>> ops, uint64_t last_count = 256) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [seq, state, wait] = ops[i];
    nlohmann::json o{{"seq", seq},     {"collective", "allreduce"}, {"count", i + 1 == ops.size() ? last_count : 256},
                     {"dtype", "float32"}, {"op", "sum"}, {"state", state}};
    if (wait >= 0) o["waiting_on"] = {{"rank", wait}};
    list.push_back(o);
  }
  return {{"weft_flight_recorder", 1},
          {"world_rank", rank},
          {"communicators", {{{"name", "world"}, {"rank", rank}, {"size", size}, {"ops", list}}}}};
}

TEST(Doctor, EveryRankCalledItAndSomeDidNotFinish) {
  auto rep = diagnose({rank_dump(0, 3, {{0, "done", -1}, {1, "started", 2}}), rank_dump(1, 3, {{0, "done", -1}, {1, "done", -1}}),
                       rank_dump(2, 3, {{0, "done", -1}, {1, "started", 0}})});
  ASSERT_EQ(rep.findings.size(), 1u);
  const auto& f = rep.findings[0];
  EXPECT_EQ(f.kind, "stuck");
  EXPECT_EQ(f.seq, 1u);
  EXPECT_EQ(f.waiting_on, (std::map<int, int>{{0, 2}, {2, 0}}));
  EXPECT_NE(f.sentence.find("ranks 0, 2 did not finish it (rank 0 waits for rank 2; rank 2 waits for rank 0); rank 1 finished it"),
            std::string::npos) << f.sentence;
}

// The step of its schedule each waiting rank is in, where the dump has it (issue 44's tree hang
// showed "94 of 136 steps done, waiting for rank 2").
TEST(Doctor, NamesTheStepEachRankWaitsIn) {
  auto d0 = rank_dump(0, 2, {{0, "started", 1}});
  d0["communicators"][0]["ops"][0]["waiting_on"]["steps_done"] = 94;
  d0["communicators"][0]["ops"][0]["waiting_on"]["steps"] = 136;
  auto rep = diagnose({d0, rank_dump(1, 2, {{0, "started", 0}})});
  ASSERT_EQ(rep.findings.size(), 1u);
  EXPECT_NE(rep.findings[0].sentence.find("rank 0 waits for rank 1 at step 95 of 136 of its schedule; rank 1 waits for rank 0"),
            std::string::npos) << rep.findings[0].sentence;
}

// Point-to-point: a receive whose send was never posted is named, with both ranks.
TEST(Doctor, NamesAReceiveWhoseSendWasNeverPosted) {
  auto dump = [](int rank, nlohmann::json ops) {
    return nlohmann::json{{"weft_flight_recorder", 1}, {"world_rank", rank},
                          {"communicators", {{{"name", "world"}, {"rank", rank}, {"size", 2}, {"ops", ops}}}}};
  };
  auto recv = [](int seq, int peer, const char* state) {
    return nlohmann::json{{"seq", seq}, {"collective", "recv"}, {"count", 4}, {"dtype", "float32"}, {"peer", peer}, {"state", state}};
  };
  auto send = [](int seq, int peer) {
    return nlohmann::json{{"seq", seq}, {"collective", "send"}, {"count", 4}, {"dtype", "float32"}, {"peer", peer}, {"state", "done"}};
  };
  // Rank 0 waits for its second message from rank 1, which sent one; rank 1's receive was matched.
  auto rep = diagnose({dump(0, {recv(0, 1, "done"), recv(1, 1, "started"), send(0, 1)}), dump(1, {send(0, 0), recv(0, 0, "done")})});
  ASSERT_EQ(rep.findings.size(), 1u) << doctor_text(rep);
  EXPECT_EQ(rep.findings[0].kind, "p2p_unmatched");
  EXPECT_NE(rep.findings[0].sentence.find("rank 0 waits in recv #1 from rank 1 (4 float32), which rank 1 never sent (its last "
                                          "send to rank 0 is #0)"),
            std::string::npos) << rep.findings[0].sentence;
  // Every receive matched by a send: no p2p finding.
  auto ok = diagnose({dump(0, {recv(0, 1, "started"), send(0, 1)}), dump(1, {send(0, 0), recv(0, 0, "done")})});
  for (const auto& f : ok.findings) EXPECT_NE(f.kind, "p2p_unmatched") << f.sentence;
}

TEST(Doctor, NoProblemWhenEveryRankFinishedTheSameCalls) {
  auto rep = diagnose({rank_dump(0, 2, {{0, "done", -1}, {1, "done", -1}}), rank_dump(1, 2, {{0, "done", -1}, {1, "done", -1}})});
  EXPECT_FALSE(rep.problem()) << doctor_text(rep);
  EXPECT_NE(doctor_text(rep).find("no problem found"), std::string::npos);
}

TEST(Doctor, ComparesOnlyWhatEveryRingStillHoldsAndNamesRanksWithoutADump) {
  // Rank 0's ring starts at #10 (older ones overwritten), rank 1 still holds #8 and #9; rank 2 wrote
  // nothing. #11 differs in count: a mismatch, not the #8/#9 that rank 0 no longer holds.
  auto rep = diagnose({rank_dump(0, 3, {{10, "done", -1}, {11, "failed", -1}}, 255),
                       rank_dump(1, 3, {{8, "done", -1}, {9, "done", -1}, {10, "done", -1}, {11, "failed", -1}})});
  ASSERT_EQ(rep.findings.size(), 1u) << doctor_text(rep);
  EXPECT_EQ(rep.findings[0].kind, "mismatch");
  EXPECT_EQ(rep.findings[0].seq, 11u);
  EXPECT_EQ(rep.findings[0].fields, (std::vector<std::string>{"count"}));
  ASSERT_FALSE(rep.notes.empty());
  EXPECT_NE(rep.notes[0].find("rank 2 of the world communicator wrote no dump"), std::string::npos) << rep.notes[0];
}

LaunchOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "weftrun");
  auto o = parse_command_line(static_cast<int>(args.size()), args.data());
  EXPECT_TRUE(o.has_value());
  return *o;
}

TEST(LauncherOptions, ProgramArgumentsAreLeftAlone) {
  LaunchOptions o = parse({"-np", "4", "--tag-output", "./prog", "-np", "5", "--tag-output"});
  EXPECT_EQ(o.np, 4);
  EXPECT_TRUE(o.tag_output);
  EXPECT_EQ(o.program, (std::vector<std::string>{"./prog", "-np", "5", "--tag-output"}));
  LaunchOptions d = parse({"-np", "2", "-x", "A=1", "-x", "B", "--", "prog", "--help"});
  EXPECT_EQ(d.program, (std::vector<std::string>{"prog", "--help"}));
  ASSERT_EQ(d.env.size(), 2u);
  EXPECT_EQ(d.env[0].second, "1");
  EXPECT_FALSE(d.env[1].second.has_value());
}

TEST(LauncherOptions, HostLists) {
  auto h = parse_host_list("a:2,b,c:4");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "a");
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].slots, 0);
  EXPECT_THROW(parse_host_list("a:x"), UsageError);
  EXPECT_THROW(parse_host_list("a,,b"), UsageError);
  auto f = parse_hostfile_text("# comment\nnode1 slots=4\nnode2:8  # mpich style\n\nnode3\n");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].slots, 4);
  EXPECT_EQ(f[1].host, "node2");
  EXPECT_EQ(f[1].slots, 8);
  EXPECT_EQ(f[2].slots, 0);
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_FALSE(is_local_host("far.example.invalid"));
}

TEST(LauncherOptions, TimelinePaths) {
  EXPECT_EQ(timeline_for_rank("/t/trace.json", 3), "/t/trace.3.json");
  EXPECT_EQ(timeline_for_rank("/t/trace", 3), "/t/trace.3");
  EXPECT_EQ(timeline_for_rank("/t.d/trace", 3), "/t.d/trace.3");
  EXPECT_EQ(timeline_for_rank("/t/r%r.json", 3), "/t/r3.json");
  EXPECT_EQ(timeline_for_rank("/t/{rank}/x.json", 12), "/t/12/x.json");
  EXPECT_EQ(timeline_for_rank("/t/trace.json", -1), "/t/trace.%r.json");
  EXPECT_EQ(timeline_for_rank("/t/{rank}.json", -1), "/t/%r.json");
}

TEST(LauncherMpi, ShellQuoting) {
  EXPECT_EQ(shell_quote("plain-word_1.0/x:y=z"), "plain-word_1.0/x:y=z");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

TEST(LauncherMpi, OpenMpiCommand) {
  LaunchOptions o = parse({"-np", "4", "-x", "A=1", "-x", "B", "--tag-output", "--timeline", "t.json", "prog", "x"});
  MpiContext ctx;
  ctx.as_root = true;
  ctx.local_cores = 2;
  ctx.forward = {"WEFT_LOG_LEVEL"};
  auto cmd = shell_join(build_mpi_command(o, MpiFlavor::kOpenMpi, "mpirun", ctx));
  EXPECT_EQ(cmd,
            "mpirun --allow-run-as-root -np 4 --oversubscribe --bind-to none --tag-output -x WEFT_LOG_LEVEL "
            "-x WEFT_TIMELINE=t.%r.json -x A=1 -x B prog x");
  ctx.as_root = false;
  ctx.local_cores = 8;
  o.bind = BindMode::kNuma;
  o.tag_output = false;
  o.timeline.clear();
  ctx.forward.clear();
  EXPECT_EQ(shell_join(build_mpi_command(o, MpiFlavor::kOpenMpi, "mpirun", ctx)),
            "mpirun -np 4 --map-by numa --bind-to numa -x A=1 -x B prog x");
}

TEST(LauncherMpi, MpichCommand) {
  LaunchOptions o = parse({"-np", "4", "-x", "A=1 2", "-x", "B", "-x", "C", "--tag-output", "prog"});
  o.hostfile = "/jobs/hosts";  // as --hostfile sets it; the hosts read from it do not change the command
  o.hosts = {{"n1", 4}};
  MpiContext ctx;
  EXPECT_EQ(shell_join(build_mpi_command(o, MpiFlavor::kMpich, "mpiexec", ctx)),
            "mpiexec -n 4 -genv A '1 2' -genvlist B,C -f /jobs/hosts -bind-to numa -prepend-rank prog");
  o.bind = BindMode::kNone;
  o.hostfile.clear();
  o.host_arg = "n1:2,n2:2";
  o.tag_output = false;
  o.env.clear();
  EXPECT_EQ(shell_join(build_mpi_command(o, MpiFlavor::kMpich, "mpiexec", ctx)), "mpiexec -n 4 -hosts n1:2,n2:2 prog");
}

// --keep-going: the MPI launcher must not tear the job down when a rank dies.
TEST(LauncherMpi, KeepGoingAsksTheLauncherToKeepTheOthers) {
  LaunchOptions o = parse({"-np", "2", "--keep-going", "prog"});
  EXPECT_TRUE(o.keep_going);
  MpiContext ctx;
  ctx.local_cores = 2;
  ctx.keep_going = true;
  ctx.forward = {"WEFT_MASTER_ADDR", "WEFT_JOB_SECRET"};
  EXPECT_EQ(shell_join(build_mpi_command(o, MpiFlavor::kOpenMpi, "mpirun", ctx)),
            "mpirun -np 2 --map-by numa --bind-to numa --enable-recovery -x WEFT_MASTER_ADDR -x WEFT_JOB_SECRET prog");
  EXPECT_EQ(shell_join(build_mpi_command(o, MpiFlavor::kMpich, "mpiexec", ctx)),
            "mpiexec -n 2 -genvlist WEFT_MASTER_ADDR,WEFT_JOB_SECRET -bind-to numa -disable-auto-cleanup prog");
}

TEST(LauncherMpi, AutoRule) {
  LaunchOptions o = parse({"-np", "2", "prog"});
  EXPECT_FALSE(decide_launch(o).use_mpi);
  o.hosts = parse_host_list("localhost:4");
  EXPECT_FALSE(decide_launch(o).use_mpi);
  o.mpi = MpiChoice::kMpich;
  o.dry_run = true;
  LaunchPlan p = decide_launch(o);
  EXPECT_TRUE(p.use_mpi);
  EXPECT_EQ(p.flavor, MpiFlavor::kMpich);
  EXPECT_EQ(p.mpirun, "mpiexec");
  o.mpi = MpiChoice::kNone;
  o.hosts = parse_host_list("far.example.invalid");
  EXPECT_THROW(decide_launch(o), UsageError);
}

NodeTopology two_socket_box() {
  NodeTopology t;
  t.numa = {{0, {0, 1, 2, 3}}, {1, {4, 5, 6, 7}}};
  t.cores = 8;
  auto dev = [](std::string name, int numa, std::vector<int> cpus, std::string path) {
    PciDevice d;
    d.name = d.bus_id = std::move(name);
    d.numa = numa;
    d.cpus = std::move(cpus);
    d.path = std::move(path);
    return d;
  };
  t.gpus = {dev("0000:17:00.0", 0, {0, 1, 2, 3}, "1/2/"), dev("0000:31:00.0", 0, {0, 1, 2, 3}, "1/3/"),
            dev("0000:b1:00.0", 1, {4, 5, 6, 7}, "9/10/")};
  t.nics = {dev("mlx5_0", 0, {0, 1, 2, 3}, "1/3/"), dev("mlx5_1", 1, {4, 5, 6, 7}, "9/10/")};
  t.nics[0].name = "mlx5_0";
  t.nics[1].name = "mlx5_1";
  return t;
}

TEST(LauncherBinding, AutoMode) {
  NodeTopology t = two_socket_box();
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t), BindMode::kGpu);
  t.gpus.clear();
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t), BindMode::kNuma);
  t.numa.pop_back();
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t), BindMode::kNone);
  EXPECT_EQ(resolve_bind_mode(BindMode::kNuma, t), BindMode::kNuma);
  // One NUMA node: a CPU share per rank while the ranks fit on its CPUs (4 here), else nothing.
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t, 1), BindMode::kNone);
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t, 2), BindMode::kCores);
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t, 4), BindMode::kCores);
  EXPECT_EQ(resolve_bind_mode(BindMode::kAuto, t, 5), BindMode::kNone);
}

TEST(LauncherBinding, CoresSplitIntoDisjointShares) {
  NodeTopology t = two_socket_box();  // NUMA 0: CPUs 0-3, NUMA 1: CPUs 4-7
  auto b = plan_binding(BindMode::kCores, t, 3, std::nullopt);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(b[1].cpus, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(b[2].cpus, (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(b[2].nic, "mlx5_1:1");  // its CPUs are on NUMA node 1
  auto one_each = plan_binding(BindMode::kCores, t, 8, std::nullopt);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(one_each[r].cpus, (std::vector<int>{r}));
  auto too_many = plan_binding(BindMode::kCores, t, 9, std::nullopt);
  EXPECT_TRUE(too_many[0].cpus.empty());
  EXPECT_NE(too_many[0].explanation.find("9 ranks on 8 CPUs"), std::string::npos) << too_many[0].explanation;
  EXPECT_EQ(parse_bind_mode("cores"), BindMode::kCores);
}

TEST(LauncherBinding, GpusRoundRobinWithNearestNicAndCpus) {
  auto b = plan_binding(BindMode::kGpu, two_socket_box(), 4, std::nullopt);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].cuda_device, "0");
  EXPECT_EQ(b[1].cuda_device, "1");
  EXPECT_EQ(b[2].cuda_device, "2");
  EXPECT_EQ(b[3].cuda_device, "0");
  EXPECT_EQ(b[1].nic, "mlx5_0:1");
  EXPECT_EQ(b[2].nic, "mlx5_1:1");
  EXPECT_EQ(b[2].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_NE(b[2].explanation.find("NUMA node 1"), std::string::npos) << b[2].explanation;
}

TEST(LauncherBinding, GpusFromCudaVisibleDevices) {
  auto b = plan_binding(BindMode::kGpu, two_socket_box(), 3, std::string("2,GPU-abc"));
  EXPECT_EQ(b[0].cuda_device, "2");
  EXPECT_EQ(b[0].nic, "mlx5_1:1");
  EXPECT_EQ(b[1].cuda_device, "GPU-abc");
  EXPECT_TRUE(b[1].cpus.empty());
  EXPECT_EQ(b[2].cuda_device, "2");
}

TEST(LauncherBinding, NumaRoundRobin) {
  NodeTopology t = two_socket_box();
  auto b = plan_binding(BindMode::kNuma, t, 3, std::nullopt);
  EXPECT_EQ(b[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(b[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(b[2].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(b[1].nic, "mlx5_1:1");
  EXPECT_TRUE(b[0].cuda_device.empty());
  auto none = plan_binding(BindMode::kNone, t, 2, std::nullopt);
  EXPECT_TRUE(none[0].cpus.empty() && none[0].nic.empty() && none[0].cuda_device.empty());
  t.gpus.clear();
  try {
    plan_binding(BindMode::kGpu, t, 2, std::nullopt);
    FAIL() << "no GPU: must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
  }
}

TEST(LauncherBinding, CpuLists) {
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({5}), "5");
}

TEST(LauncherTopology, ProbeFindsThisMachine) {
  NodeTopology t = probe_node_topology();
  ASSERT_FALSE(t.numa.empty());
  EXPECT_FALSE(t.numa[0].cpus.empty());
  EXPECT_GT(t.cores, 0);
}

}  // namespace
}  // namespace weft::launcher
