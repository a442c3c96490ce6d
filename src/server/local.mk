# src/server/local.mk -- hearth serve's HTTP server, part of the hearth
# program: serve.c (the command: options, model, signals, the drain), request.c (bodies to parameters), toolcall.c (the tool-call
# formats), server.c (the server's life, routing and the small
# endpoints), jobs.c (generation requests and the engines' threads),
# models.c (the model table: loads on first use, idle and memory
# unloads), embeddings.c (/v1/embeddings, as jobs),
# openai.c (the JSON of responses and server-sent events), responses.c
# (the Responses API's objects, events and store), http.c (the
# HTTP/1.1 connections, over GnuTLS when found), http_parse.c (request
# heads and body framing), metrics.c (/metrics), chat.html (the chat page
# of GET /, embedded as a C array by embed-page.sh).

# The serve command, in every build (it says so when the server is not
# built).
src_hearth_SOURCES += src/server/serve.c

# set in both cases: the program's objects are named for it either way
src_hearth_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/cli -I$(top_srcdir)/src/server $(GNUTLS_CFLAGS) \
	$(JSON_CFLAGS)

if HAVE_SERVER
src_hearth_SOURCES += \
	src/server/buf.c \
	src/server/buf.h \
	src/server/chat_page.h \
	src/server/embeddings.c \
	src/server/http.c \
	src/server/http.h \
	src/server/http_parse.c \
	src/server/http_parse.h \
	src/server/jobs.c \
	src/server/metrics.c \
	src/server/metrics.h \
	src/server/models.c \
	src/server/openai.c \
	src/server/request.c \
	src/server/request.h \
	src/server/responses.c \
	src/server/server.c \
	src/server/server.h \
	src/server/server_impl.h \
	src/server/toolcall.c \
	src/server/toolcall.h
src_hearth_LDADD += $(GNUTLS_LIBS) $(JSON_LIBS) -lpthread
nodist_src_hearth_SOURCES = src/server/chat_page.c
else
EXTRA_DIST += src/server/buf.c src/server/buf.h src/server/chat_page.h src/server/embeddings.c src/server/http.c src/server/http.h src/server/http_parse.c src/server/http_parse.h \
	src/server/jobs.c src/server/metrics.c src/server/metrics.h src/server/models.c src/server/openai.c \
	src/server/request.c src/server/request.h src/server/responses.c src/server/server.c src/server/server.h \
	src/server/server_impl.h src/server/toolcall.c src/server/toolcall.h
endif

# The chat page: its source is a plain HTML file (its style and script
# inline), turned into src/server/chat_page.c in the build directory with
# POSIX sh, od and sed alone.
EXTRA_DIST += src/server/chat.html src/server/embed-page.sh
CLEANFILES += src/server/chat_page.c
src/server/chat_page.c: $(srcdir)/src/server/chat.html $(srcdir)/src/server/embed-page.sh
	$(AM_V_GEN)$(MKDIR_P) src/server && \
	$(SHELL) $(srcdir)/src/server/embed-page.sh $(srcdir)/src/server/chat.html srv_chat_page > $@-t && \
	mv $@-t $@
