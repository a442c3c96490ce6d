/*
 * chat_page.h -- the chat page hearth serve answers GET / with: the
 * bytes of src/server/chat.html, which the build turns into a C array
 * (src/server/embed-page.sh, the rule in src/server/local.mk).
 */
#ifndef HEARTH_SERVER_CHAT_PAGE_H
#define HEARTH_SERVER_CHAT_PAGE_H

#include <stddef.h>

extern const unsigned char srv_chat_page[];
extern const size_t srv_chat_page_len;
/* The page's entity tag, quoted: its checksum and length. */
extern const char srv_chat_page_etag[];

#endif /* HEARTH_SERVER_CHAT_PAGE_H */
