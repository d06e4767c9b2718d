#include "fetch.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "tree.h"

struct sink {
  int fd;
  EVP_MD_CTX *md;
  unsigned long long max, got;
  int too_big, write_errno, md_failed;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
  struct sink *s = arg;
  size_t n = size * nmemb, done = 0;

  if (s->got + n > s->max) {
    s->too_big = 1;
    return 0; /* makes curl fail with CURLE_WRITE_ERROR */
  }
  if (!EVP_DigestUpdate(s->md, data, n)) {
    s->md_failed = 1;
    return 0;
  }
  while (done < n) {
    ssize_t w = write(s->fd, data + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0) {
      s->write_errno = errno;
      return 0;
    }
    done += (size_t)w;
  }
  s->got += n;
  return n;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void init_curl(void)
{
  curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int rootfs_fetch(const char *url, unsigned long long max_bytes, int out_fd, char sha256_hex[65],
                 unsigned long long *size, agt_error_t *err)
{
  char errbuf[CURL_ERROR_SIZE] = "";
  struct sink s = {.fd = out_fd, .max = max_bytes};
  CURL *c = NULL;
  CURLcode rc;
  unsigned char digest[32];
  unsigned dlen;
  long status = 0;
  int ret = -1;

  pthread_once(&curl_once, init_curl);
  if (curl_init_rc != CURLE_OK)
    return agt_error_kind(err, AGT_E_INTERNAL, "libcurl init: %s",
                          curl_easy_strerror(curl_init_rc));
  s.md = EVP_MD_CTX_new();
  if (s.md == NULL || !EVP_DigestInit_ex(s.md, EVP_sha256(), NULL)) {
    agt_error_kind(err, AGT_E_INTERNAL, "sha256 init");
    goto out;
  }
  c = curl_easy_init();
  if (c == NULL) {
    agt_error_kind(err, AGT_E_INTERNAL, "curl_easy_init failed");
    goto out;
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the bitmask options are deprecated */
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* we run on libuv's threadpool */
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L); /* give up below 1 KiB/s ... */
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);    /* ... for 30 s */
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_bytes);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "agtd-rootfs");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (s.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
    agt_error_kind(err, AGT_E_LIMIT, "download '%s' is larger than %llu bytes", url, max_bytes);
    goto out;
  }
  if (s.write_errno) {
    agt_error_make(err, s.write_errno, "download '%s': write", url);
    goto out;
  }
  if (rc != CURLE_OK) {
    if (rc == CURLE_HTTP_RETURNED_ERROR)
      agt_error_kind(err, AGT_E_NOTFOUND, "download '%s': HTTP status %ld", url, status);
    else
      agt_error_kind(err, AGT_E_INTERNAL, "download '%s': %s", url,
                     errbuf[0] ? errbuf : curl_easy_strerror(rc));
    goto out;
  }
  if (s.md_failed || !EVP_DigestFinal_ex(s.md, digest, &dlen)) {
    agt_error_kind(err, AGT_E_INTERNAL, "sha256 of '%s'", url);
    goto out;
  }
  rootfs_hex(digest, sha256_hex);
  *size = s.got;
  ret = 0;
out:
  if (c)
    curl_easy_cleanup(c);
  EVP_MD_CTX_free(s.md);
  return ret;
}
