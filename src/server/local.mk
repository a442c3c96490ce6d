# src/server/local.mk -- hearth serve's HTTP server, part of the hearth
# program: serve.c (the command: options, model, signals, the drain), request.c (bodies to parameters), toolcall.c (the tool-call
# formats), server.c (the server's life, routing and the small
# endpoints), jobs.c (generation requests and the engine's thread),
# embeddings.c (/v1/embeddings, as jobs),
# openai.c (the JSON of responses and server-sent events), http.c (the
# HTTP/1.1 connections, over GnuTLS when found), http_parse.c (request
# heads and body framing), metrics.c (/metrics).

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
	src/server/embeddings.c \
	src/server/http.c \
	src/server/http.h \
	src/server/http_parse.c \
	src/server/http_parse.h \
	src/server/jobs.c \
	src/server/metrics.c \
	src/server/metrics.h \
	src/server/openai.c \
	src/server/request.c \
	src/server/request.h \
	src/server/server.c \
	src/server/server.h \
	src/server/server_impl.h \
	src/server/toolcall.c \
	src/server/toolcall.h
src_hearth_LDADD += $(GNUTLS_LIBS) $(JSON_LIBS) -lpthread
else
EXTRA_DIST += src/server/buf.c src/server/buf.h src/server/embeddings.c src/server/http.c src/server/http.h src/server/http_parse.c src/server/http_parse.h \
	src/server/jobs.c src/server/metrics.c src/server/metrics.h src/server/openai.c \
	src/server/request.c src/server/request.h src/server/server.c src/server/server.h \
	src/server/server_impl.h src/server/toolcall.c src/server/toolcall.h
endif
