#include "http_get.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace weft::test {
namespace {

constexpr std::string_view kBody =
    "# HELP weft_x a counter\n"
    "weft_x 7\n"
    "weft_x_total 12\n"
    "weft_y{reason=\"bad_tag\"} 3\n"
    "weft_y{reason=\"replayed\"} 0\n"
    "weft_z 1.5e+06";  // the last line has no newline

struct SampleCase {
  std::string_view series;
  double value;
};

class PrometheusSample : public ::testing::TestWithParam<SampleCase> {};

TEST_P(PrometheusSample, FindsTheExactSeriesOnly) {
  EXPECT_EQ(prometheus_sample(kBody, GetParam().series), GetParam().value);
}

INSTANTIATE_TEST_SUITE_P(Series, PrometheusSample,
                         ::testing::Values(SampleCase{"weft_x", 7}, SampleCase{"weft_x_total", 12},
                                           SampleCase{"weft_y{reason=\"bad_tag\"}", 3},
                                           SampleCase{"weft_y{reason=\"replayed\"}", 0},
                                           SampleCase{"weft_z", 1.5e6}, SampleCase{"weft_y", -1},
                                           SampleCase{"weft", -1}, SampleCase{"a counter", -1}));

TEST(HttpGet, APortNobodyListensOnIsAnErrorNamingTheRequest) {
  // A listening socket that is closed again: its port refuses connections.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  const uint16_t port = ntohs(a.sin_port);
  auto body = http_get(port, "/metrics");
  ASSERT_FALSE(body);
  EXPECT_NE(body.status().message().find("GET 127.0.0.1:" + std::to_string(port) + "/metrics"), std::string::npos)
      << body.status().to_string();
}

TEST(HttpGet, AHostThatIsNoAddressIsRefused) {
  auto body = http_get("localhost", 80, "/");
  ASSERT_FALSE(body);
  EXPECT_NE(body.status().message().find("'localhost' is not an IP address"), std::string::npos);
}

}  // namespace
}  // namespace weft::test
