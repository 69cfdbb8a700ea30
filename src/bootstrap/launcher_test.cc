// braidCommInitFromEnv's planning from launcher environments (torchrun, Open MPI, PMI, Slurm,
// BRAID_RANK), and a real rendezvous of ranks that agreed on it without exchanging anything.
#include "bootstrap/launcher.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "bootstrap/bootstrap.h"

namespace braid {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Result<LaunchPlan> plan(const Env& env, const Config& config = Config()) {
  return planLaunch(config, lookup(env));
}

void expectError(const Result<LaunchPlan>& p, const std::string& fragment) {
  ASSERT_FALSE(p.ok()) << "expected an error about " << fragment;
  EXPECT_NE(p.status().message().find(fragment), std::string::npos) << p.status().message();
}

TEST(Launcher, TorchrunUsesMasterPortPlusOneAndTheRunId) {
  const Env env = {{"RANK", "3"},
                   {"WORLD_SIZE", "8"},
                   {"LOCAL_WORLD_SIZE", "4"},
                   {"MASTER_ADDR", "node1"},
                   {"MASTER_PORT", "29500"},
                   {"TORCHELASTIC_RUN_ID", "job-7"}};
  Result<LaunchPlan> p = plan(env);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->launcher, "torchrun");
  EXPECT_EQ(p->rank, 3);
  EXPECT_EQ(p->size, 8);
  EXPECT_EQ(p->host, "node1");
  EXPECT_EQ(p->port, 29501);
  EXPECT_EQ(p->secretSource, "TORCHELASTIC_RUN_ID");
  // Every rank derives the same secret; another job a different one.
  Env other = env;
  other["RANK"] = "0";
  EXPECT_EQ(plan(other)->secret, p->secret);
  other["TORCHELASTIC_RUN_ID"] = "job-8";
  EXPECT_NE(plan(other)->secret, p->secret);
}

TEST(Launcher, OpenMpiOnOneHostNeedsNoAddress) {
  const Env env = {{"OMPI_COMM_WORLD_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                   {"OMPI_MCA_ess_base_jobid", "1960837121"},
                   {"OMPI_MCA_orte_precondition_transports", "07967d760ac7f36f-f91a0b792d57f65a"}};
  Result<LaunchPlan> p = plan(env);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->launcher, "Open MPI");
  EXPECT_EQ(p->host, "127.0.0.1");
  EXPECT_GE(p->port, 20000);
  EXPECT_LT(p->port, 32000);
  // The per-job random key is preferred over the guessable job id.
  EXPECT_EQ(p->secretSource, "OMPI_MCA_orte_precondition_transports");
}

TEST(Launcher, AcrossHostsWithoutAnAddressAsksForBraidAddr) {
  Env env = {{"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "4"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
             {"OMPI_MCA_ess_base_jobid", "17"}};
  expectError(plan(env), "BRAID_ADDR");
  Config config;
  config.launchAddr = "10.1.2.3:4567";
  Result<LaunchPlan> p = plan(env, config);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->host, "10.1.2.3");
  EXPECT_EQ(p->port, 4567);
  config.launchAddr = "[fd00::2]:80";
  EXPECT_EQ(plan(env, config)->host, "fd00::2");
  for (const char* bad : {"10.1.2.3", "host:0", "host:65536", ":80", "fd00::2:80", "[::1]80"}) {
    config.launchAddr = bad;
    expectError(plan(env, config), "BRAID_ADDR");
  }
}

TEST(Launcher, SlurmAcrossNodesUsesTheFirstNode) {
  const Env env = {{"SLURM_PROCID", "5"},         {"SLURM_NTASKS", "8"},
                   {"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_JOB_ID", "4242"},
                   {"SLURM_STEP_ID", "0"},        {"SLURM_STEP_NODELIST", "gpu[07-08]"}};
  Result<LaunchPlan> p = plan(env);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->launcher, "Slurm");
  EXPECT_EQ(p->host, "gpu07");
  EXPECT_EQ(p->port, derivedPort("4242.0"));
  EXPECT_EQ(p->secretSource, "SLURM_JOB_ID");
  Env oneNode = env;
  oneNode["SLURM_STEP_NUM_NODES"] = "1";
  EXPECT_EQ(plan(oneNode)->host, "127.0.0.1");
}

TEST(Launcher, SlurmNodeListsAndDerivedPorts) {
  EXPECT_EQ(firstSlurmHost("node01"), "node01");
  EXPECT_EQ(firstSlurmHost("a,b"), "a");
  EXPECT_EQ(firstSlurmHost("node[007-009,012],gpu3"), "node007");
  EXPECT_EQ(firstSlurmHost("rack[3,5]-n[1-2]"), "rack3");
  EXPECT_EQ(derivedPort("x"), derivedPort("x"));
  EXPECT_NE(derivedPort("job-1"), derivedPort("job-2"));
}

TEST(Launcher, BraidRankNeedsItsPartnersAndASecret) {
  Config config;
  config.launchRank = 1;
  expectError(plan({}, config), "BRAID_WORLD_SIZE");
  config.launchWorldSize = 2;
  expectError(plan({}, config), "BRAID_SECRET");
  config.launchSecret = "s3cret";
  expectError(plan({}, config), "BRAID_ADDR");
  config.launchAddr = "127.0.0.1:5000";
  Result<LaunchPlan> p = plan({}, config);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->launcher, "BRAID_RANK");
  EXPECT_EQ(p->secretSource, "BRAID_SECRET");
  config.launchRank = 2;
  expectError(plan({}, config), "not below the world size");
}

TEST(Launcher, MalformedOrMissingLauncherVariablesAreErrors) {
  expectError(plan({}), "no launcher environment");
  expectError(plan({{"PMI_RANK", "0"}}), "PMI_SIZE");
  expectError(plan({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}), "PMI_RANK");
  expectError(plan({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE");
  // A launcher without any job id cannot agree on a secret by itself.
  expectError(plan({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "2"}}),
              "BRAID_SECRET");
  // torchrun's default run id is the same for every job: not an id.
  expectError(plan({{"RANK", "0"},
                    {"WORLD_SIZE", "2"},
                    {"TORCHELASTIC_RUN_ID", "none"},
                    {"MASTER_ADDR", "h"},
                    {"MASTER_PORT", "1"}}),
              "BRAID_SECRET");
}

TEST(Launcher, RanksThatPlannedAloneMeetAtTheRendezvous) {
  constexpr int kRanks = 3;
  Env env = {{"OMPI_COMM_WORLD_SIZE", std::to_string(kRanks)},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(kRanks)},
             {"OMPI_MCA_ess_base_jobid", "launcher-test-" + std::to_string(::getpid())}};
  std::vector<Status> out(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    Env mine = env;
    mine["OMPI_COMM_WORLD_RANK"] = std::to_string(r);
    threads.emplace_back([&out, r, mine] {
      Result<LaunchPlan> p = planLaunch(Config(), lookup(mine));
      if (!p.ok()) {
        out[r] = p.status();
        return;
      }
      // Non-root ranks may start first: they retry until the root listens.
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Result<braidUniqueId> id = launchRendezvous(p.value(), 20);
      if (!id.ok()) {
        out[r] = id.status();
        return;
      }
      WaitPolicy wait;
      wait.timeoutSeconds = 20;
      Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(id.value(), r, kRanks, "lo", wait);
      if (!b.ok()) {
        out[r] = b.status();
        return;
      }
      int value = r * 10;
      std::vector<int> all(kRanks);
      all[r] = value;
      out[r] = b.value()->allGather(all.data(), sizeof(int));
      for (int q = 0; q < kRanks && out[r].ok(); ++q) {
        if (all[q] != q * 10) out[r] = internalError("wrong value from rank " + std::to_string(q));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_TRUE(out[r].ok()) << "rank " << r << ": " << out[r].message();
}

}  // namespace
}  // namespace braid
