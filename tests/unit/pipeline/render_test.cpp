#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

#include "emit/pprof.h"
#include "pipeline/render.h"
#include "profile/folded_reader.h"
#include "test_support.h"

namespace flamebpf::pipeline {
namespace {

using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

std::string contents(const std::filesystem::path& path)
{
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class RenderCommand : public ::testing::Test {
protected:
  void SetUp() override
  {
    write_file(dir_.path() / "a.folded", "java;main;Foo.bar_[j] 3\njava;main;read_[k] 1\n");
    write_file(dir_.path() / "b.folded", "perf-1;[unknown];find_slot 2\njava;main;Foo.bar_[j] 4\n");
    config_.mode = cli::Mode::kRender;
    config_.render_inputs = {dir_.path() / "a.folded", dir_.path() / "b.folded"};
  }

  TempDir dir_;
  cli::Config config_;
};

TEST_F(RenderCommand, PbGzIsThePprofOfTheSummedInputs)
{
  config_.output = dir_.path() / "r.pb.gz";
  auto rendered = render(config_);
  ASSERT_TRUE(rendered.has_value()) << rendered.error().message;

  profile::FoldedInput inputs;
  for (const auto& path : config_.render_inputs)
    ASSERT_TRUE(profile::read_folded_file(path, inputs).has_value());
  std::ostringstream expected;
  ASSERT_TRUE(emit::PprofEmitter().write(inputs.profile, expected).has_value());
  std::string written = contents(config_.output);
  ASSERT_GT(written.size(), 2u);
  EXPECT_EQ(written.substr(0, 2), "\x1f\x8b") << "not gzip: " << written.substr(0, 40);
  EXPECT_EQ(written, expected.str());
}

TEST_F(RenderCommand, OtherNamesGetSummedFoldedText)
{
  config_.output = dir_.path() / "r.txt";
  ASSERT_TRUE(render(config_).has_value());
  std::string written = contents(config_.output);
  EXPECT_NE(written.find("java;main;Foo.bar_[j] 7\n"), std::string::npos) << written;
}

TEST(DiffCommand, RefusesPprofNamesBeforeReadingAnything)
{
  TempDir dir;
  cli::Config config;
  config.mode = cli::Mode::kDiff;
  config.diff_before = dir.path() / "missing-before.folded";
  config.diff_after = dir.path() / "missing-after.folded";
  config.output = dir.path() / "d.pb.gz";
  auto diffed = diff(config);
  ASSERT_FALSE(diffed.has_value());
  EXPECT_TRUE(diffed.error().usage);
  EXPECT_NE(diffed.error().message.find("-diff_base"), std::string::npos) << diffed.error().message;
  EXPECT_FALSE(std::filesystem::exists(config.output));
}

} // namespace
} // namespace flamebpf::pipeline
