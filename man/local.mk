# man/local.mk -- one page for hearth(1) and one per subcommand.

dist_man_MANS += \
	man/hearth.1 \
	man/hearth-devices.1 \
	man/hearth-inspect.1 \
	man/hearth-pull.1 \
	man/hearth-sampling.7 \
	man/hearth-tokenize.1
