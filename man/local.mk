# man/local.mk -- one page for hearth(1) and one per subcommand.

dist_man_MANS += \
	man/hearth.1 \
	man/hearth-bench.1 \
	man/hearth-chat.1 \
	man/hearth-devices.1 \
	man/hearth-embed.1 \
	man/hearth-grammar.7 \
	man/hearth-inspect.1 \
	man/hearth-mpi.7 \
	man/hearth-perplexity.1 \
	man/hearth-pull.1 \
	man/hearth-quantize.1 \
	man/hearth-replicas.7 \
	man/hearth-run.1 \
	man/hearth-sampling.7 \
	man/hearth-serve.1 \
	man/hearth-speculation.7 \
	man/hearth-template.1 \
	man/hearth-tokenize.1
