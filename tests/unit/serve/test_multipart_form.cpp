// multipart_form (POST /upload/image's body): what clients send is read, and hostile or broken
// bodies (no boundary, truncated parts, missing CRLFs, huge headers, parts without a name,
// duplicate fields, a boundary inside the data) are refused whole or read as RFC 2046 says.
#include "orch/serve/multipart_form.hpp"

#include <gtest/gtest.h>


#include "orch/serve/errc.hpp"

namespace {

using namespace std::string_literals;
using orch::serve::first_part;
using orch::serve::form_boundary;
using orch::serve::form_limits;
using orch::serve::parse_form;
namespace errc = orch::serve::serve_errc;

const std::string type = "multipart/form-data; boundary=XyZ";

std::string part(const std::string& headers, const std::string& data) {
  return "--XyZ\r\n" + headers + "\r\n" + data + "\r\n";
}
const std::string close_delimiter = "--XyZ--\r\n";

void expect_refused(const std::string& content_type, const std::string& body,
                    const std::string& says, const form_limits& limits = {}) {
  const auto r = parse_form(content_type, body, limits);
  ASSERT_FALSE(r.ok()) << "accepted: " << body.substr(0, 200);
  EXPECT_EQ(r.err().code, errc::invalid_form);
  EXPECT_NE(r.err().message.find(says), std::string::npos) << r.err().message;
}

TEST(multipart_form, reads_a_file_and_text_fields_as_curl_sends_them) {
  const std::string png("\x89PNG\r\n\x1a\n\0\0\r\n\r\n--Xy", 18);
  const std::string body =
      part(
          "Content-Disposition: form-data; name=\"image\"; filename=\"cat.png\"\r\n"
          "Content-Type: image/png\r\n",
          png) +
      part("Content-Disposition: form-data; name=\"overwrite\"\r\n", "true") +
      part("content-disposition: FORM-DATA; name=subfolder\r\n", "") + close_delimiter;
  const auto r = parse_form(type, body);
  ASSERT_TRUE(r.ok()) << r.err().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "image");
  EXPECT_EQ((*r)[0].filename, "cat.png");
  EXPECT_EQ((*r)[0].content_type, "image/png");
  EXPECT_EQ((*r)[0].data, png);  // CRLFs, NULs and a boundary prefix inside stay data
  EXPECT_EQ((*r)[1].name, "overwrite");
  EXPECT_FALSE((*r)[1].filename.has_value());
  EXPECT_EQ((*r)[1].data, "true");
  EXPECT_EQ((*r)[2].name, "subfolder");
  EXPECT_EQ((*r)[2].data, "");
}

TEST(multipart_form, a_quoted_boundary_a_preamble_padding_and_an_epilogue_are_read) {
  const std::string body =
      "preamble, ignored\r\n--a b'c \t\r\n"
      "Content-Disposition: form-data; name=\"x\"\r\n\r\nvalue\r\n"
      "--a b'c--\r\nepilogue, ignored";
  const auto r = parse_form("Multipart/Form-Data; charset=utf-8; boundary=\"a b'c\"", body);
  ASSERT_TRUE(r.ok()) << r.err().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].data, "value");
}

TEST(multipart_form, quoted_escapes_and_rfc5987_filenames_are_decoded) {
  const std::string body =
      part("Content-Disposition: form-data; name=\"a\"; filename=\"say \\\"hi\\\".png\"\r\n", "1") +
      part(
          "Content-Disposition: form-data; name=\"b\"; filename=\"fallback.png\"; "
          "filename*=UTF-8''%e2%82%ac%20x.png\r\n",
          "2") +
      close_delimiter;
  const auto r = parse_form(type, body);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)[0].filename, "say \"hi\".png");
  EXPECT_EQ((*r)[1].filename, "\xe2\x82\xac x.png");
}

TEST(multipart_form, a_field_sent_twice_is_read_as_comfyui_reads_it_the_first) {
  const std::string body = part("Content-Disposition: form-data; name=\"type\"\r\n", "input") +
                           part("Content-Disposition: form-data; name=\"type\"\r\n", "output") +
                           close_delimiter;
  const auto r = parse_form(type, body);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->size(), 2u);
  ASSERT_NE(first_part(*r, "type"), nullptr);
  EXPECT_EQ(first_part(*r, "type")->data, "input");
  EXPECT_EQ(first_part(*r, "image"), nullptr);
}

TEST(multipart_form, a_content_type_without_a_usable_boundary_is_refused) {
  const std::string body =
      part("Content-Disposition: form-data; name=\"x\"\r\n", "v") + close_delimiter;
  expect_refused("multipart/form-data", body, "no boundary");
  expect_refused("multipart/form-data; boundary=", body, "no boundary");
  expect_refused("multipart/form-data; boundary=\"XyZ", body, "unclosed quote");
  expect_refused("application/x-www-form-urlencoded", body, "is not one");
  expect_refused("", body, "is not one");
  expect_refused("multipart/form-data; boundary=" + std::string(71, 'a'), body, "longer than 70");
  expect_refused("multipart/form-data; boundary=a\"b", body, "stray quote");
  expect_refused("multipart/form-data; boundary=a;boundary=b", body, "twice");
  expect_refused("multipart/form-data; boundary=a\x01", body, "control byte");
  expect_refused("multipart/form-data; boundary=a{b}", body, "does not allow");
  EXPECT_FALSE(form_boundary("multipart/mixed; boundary=x").ok());
  EXPECT_EQ(*form_boundary("multipart/form-data; boundary=x"), "x");
}

TEST(multipart_form, a_body_that_never_names_its_boundary_is_refused) {
  expect_refused(type, "", "no line with its boundary");
  expect_refused(type, "just some bytes", "no line with its boundary");
  expect_refused(type, "--XyW\r\n\r\nx\r\n--XyW--", "no line with its boundary");
}

TEST(multipart_form, truncated_bodies_are_refused_wherever_they_end) {
  const std::string whole =
      part("Content-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n",
           std::string(100, 'p')) +
      close_delimiter;
  // Every cut short of the close delimiter's "--" is refused, never half-read.
  const auto end = whole.find("--XyZ--") + 6;
  for (std::size_t n = 0; n < end; ++n) {
    const auto r = parse_form(type, whole.substr(0, n));
    EXPECT_FALSE(r.ok()) << "cut at " << n << " was accepted";
  }
  expect_refused(type, whole.substr(0, 20), "ends inside the header");
  expect_refused(type, whole.substr(0, whole.size() - 20), "truncated");
  EXPECT_TRUE(parse_form(type, whole.substr(0, end + 1)).ok());  // "--XyZ--": the CRLF is optional
}

TEST(multipart_form, missing_crlfs_are_refused) {
  // The boundary line not ended by CRLF.
  expect_refused(type, "--XyZContent-Disposition: form-data; name=\"x\"\r\n\r\nv\r\n--XyZ--",
                 "text after the boundary");
  // Bare LFs: a header block that never ends in an empty CRLF line.
  expect_refused(type, "--XyZ\nContent-Disposition: form-data; name=\"x\"\n\nv\n--XyZ--",
                 "text after the boundary");
  expect_refused(type, "--XyZ\r\nContent-Disposition: form-data; name=\"x\"\n\nv\r\n--XyZ--",
                 "ends inside the header");
  // The data not followed by CRLF before the next delimiter: the delimiter is not there.
  expect_refused(type, "--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nv--XyZ--",
                 "truncated");
}

TEST(multipart_form, a_huge_part_header_is_refused_without_reading_on) {
  const std::string huge =
      "--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\nX-Pad: " + std::string(20000, 'a') +
      "\r\n\r\nv\r\n--XyZ--\r\n";
  expect_refused(type, huge, "header is larger than 8192 bytes");
  form_limits roomy;
  roomy.max_part_header = 32 << 10;
  EXPECT_TRUE(parse_form(type, huge, roomy).ok());
  // An unending header, with no empty line at all, is refused at the cap, not searched to the end.
  expect_refused(type, "--XyZ\r\nX: " + std::string(1 << 20, 'a'), "header is larger than");
}

TEST(multipart_form, parts_without_a_form_data_name_are_refused) {
  expect_refused(type, part("", "v") + close_delimiter, "no Content-Disposition");
  expect_refused(type, part("Content-Type: text/plain\r\n", "v") + close_delimiter,
                 "no Content-Disposition");
  expect_refused(type, part("Content-Disposition: form-data\r\n", "v") + close_delimiter,
                 "no name");
  expect_refused(type, part("Content-Disposition: form-data; name=\"\"\r\n", "v") + close_delimiter,
                 "no name");
  expect_refused(
      type, part("Content-Disposition: form-data; filename=\"a.png\"\r\n", "v") + close_delimiter,
      "no name");
  expect_refused(type,
                 part("Content-Disposition: attachment; name=\"x\"\r\n", "v") + close_delimiter,
                 "not form-data");
}

TEST(multipart_form, ambiguous_part_headers_are_refused) {
  const std::string cd = "Content-Disposition: form-data; name=\"x\"\r\n";
  expect_refused(type, part(cd + cd, "v") + close_delimiter, "two Content-Disposition");
  expect_refused(type, part(cd + "Content-Type: a\r\nContent-Type: b\r\n", "v") + close_delimiter,
                 "two Content-Type");
  expect_refused(
      type,
      part("Content-Disposition: form-data; name=\"x\"; name=\"y\"\r\n", "v") + close_delimiter,
      "twice");
  expect_refused(type, part(cd + " folded: line\r\n", "v") + close_delimiter, "folded");
  expect_refused(type, part(cd + "no colon here\r\n", "v") + close_delimiter, "not 'Name: value'");
  expect_refused(type,
                 part("Content-Disposition: form-data; name=\"x\0y\"\r\n"s, "v") + close_delimiter,
                 "control byte");
  expect_refused(type,
                 part("Content-Disposition: form-data; name=\"a\"; filename*=latin1''x\r\n", "v") +
                     close_delimiter,
                 "filename*");
  expect_refused(type,
                 part("Content-Disposition: form-data; name=\"a\"; filename*=UTF-8''%zz\r\n", "v") +
                     close_delimiter,
                 "filename*");
}

TEST(multipart_form, a_boundary_inside_the_data_is_data_unless_it_opens_a_line) {
  // "--XyZ" inside a line, and a longer boundary's prefix on a line of its own, are data.
  const std::string data = "a--XyZ--b\r\n--Xy\r\n-XyZ\r\n";
  // The parts are views into the body: it must outlive them.
  const std::string body =
      part("Content-Disposition: form-data; name=\"x\"\r\n", data) + close_delimiter;
  auto r = parse_form(type, body);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)[0].data, data);
  // CRLF "--XyZ" followed by more text is a delimiter the sender did not mean: RFC 2046 forbids
  // the boundary inside a part, and guessing would let two readers disagree.
  expect_refused(
      type, part("Content-Disposition: form-data; name=\"x\"\r\n", "a\r\n--XyZW") + close_delimiter,
      "text after the boundary");
}

TEST(multipart_form, more_parts_than_the_cap_are_refused) {
  std::string body;
  for (int i = 0; i < 65; ++i)
    body += part("Content-Disposition: form-data; name=\"f" + std::to_string(i) + "\"\r\n", "v");
  expect_refused(type, body + close_delimiter, "more than 64 parts");
  EXPECT_TRUE(parse_form(type, body.substr(body.find("--XyZ", 1)) + close_delimiter).ok());
}

TEST(multipart_form, a_pathological_body_is_read_in_linear_time) {
  // Every line almost a delimiter: a quadratic search would take minutes over 16 MiB, past the
  // test's timeout (no timing in the assertion itself).
  std::string data;
  while (data.size() < (std::size_t{16} << 20)) data += "\r\n--XyY";
  const std::string body =
      part("Content-Disposition: form-data; name=\"x\"\r\n", data) + close_delimiter;
  const auto r = parse_form(type, body);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)[0].data, data);
}

}  // namespace
