#include "test_support.h"

#include <algorithm>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace flamebpf::testing {

std::string data_path(const std::string& relative)
{
  return std::string(FLAMEBPF_TEST_DATA) + "/" + relative;
}

std::string read_data(const std::string& relative)
{
  std::ifstream in(data_path(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open fixture " << data_path(relative);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

int listen_at(const std::string& path)
{
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  EXPECT_LT(path.size(), sizeof address.sun_path);
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << path;
  EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_EQ(::listen(fd, 5), 0);
  return fd;
}

std::string read_request(int connection)
{
  std::string request;
  char c = 0;
  while (std::count(request.begin(), request.end(), '\0') < 5 && ::read(connection, &c, 1) == 1)
    request += c;
  return request;
}

void write_file(const std::filesystem::path& path, const std::string& content)
{
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path.string());
}

Result<OpenedElf> open_elf(const std::string& path)
{
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat status {};
  if (!fd.valid() || ::fstat(fd.get(), &status) != 0)
    return fail(error("cannot open " + path));
  auto reader =
      ElfReader::open(ElfBytes::file(fd.get(), static_cast<uint64_t>(status.st_size)), path);
  if (!reader)
    return fail(reader.error());
  return OpenedElf{std::move(fd), std::move(*reader)};
}

} // namespace flamebpf::testing
