# Build, run and test ngx_platform_module.
#
#   make                  module against Debian's nginx-dev tree
#   make NGINX_SRC=DIR    module against an upstream nginx source tree
#   make asan             module built with AddressSanitizer
#   make run              dev servers: PostgreSQL, Redis, nginx (scripts/dev)
#   make test             the whole test suite, with the plain and then the
#                         AddressSanitizer build (scripts/test)
#   make test-plain       the suite with the plain build only
#   make bench            benchmark (scripts/bench)
#   make deb              Debian package, build/deb/ (scripts/deb)

NGINX_SRC  ?= /usr/share/nginx/src
BUILD      ?= build
CC         ?= cc

MODULE_SRCS = config ngx_platform_module.c $(wildcard src/*.c src/*.h)

# Debian's nginx-dev ships the configure flags its nginx was built with;
# building with them keeps the module binary-compatible with nginx-core.
CONF_FLAGS  = $(shell if [ -f $(NGINX_SRC)/conf_flags ]; then \
                bash -c '. $(NGINX_SRC)/conf_flags; \
                         printf "%s " "$${NGX_CONF_FLAGS[@]}"'; \
              else echo --with-compat; fi)

ASAN_FLAGS  = -fsanitize=address -fno-omit-frame-pointer -DNGX_DEBUG_PALLOC=1

.PHONY: all module asan run stop test test-plain bench clean

all: module

module: $(BUILD)/ngx_platform_module.so

asan: $(BUILD)/asan/ngx_platform_module.so

$(BUILD)/ngx_platform_module.so: $(MODULE_SRCS)
	@mkdir -p $(BUILD)
	@scripts/build-module "$(NGINX_SRC)" "$(BUILD)/nginx" "$(CC)" "" "" \
	    $(CONF_FLAGS)
	@# a new file, not one rewritten in place: running nginx maps the old
	cp $(BUILD)/nginx/objs/ngx_platform_module.so $@.tmp && mv -f $@.tmp $@

$(BUILD)/asan/ngx_platform_module.so: $(MODULE_SRCS)
	@mkdir -p $(BUILD)/asan
	@scripts/build-module "$(NGINX_SRC)" "$(BUILD)/nginx-asan" "$(CC)" \
	    "$(ASAN_FLAGS)" "-fsanitize=address" $(CONF_FLAGS)
	cp $(BUILD)/nginx-asan/objs/ngx_platform_module.so $@.tmp && mv -f $@.tmp $@

run:
	scripts/dev start

stop:
	scripts/dev stop

test:
	scripts/test
	PLATFORM_ASAN=1 scripts/test

test-plain:
	scripts/test

bench:
	scripts/bench

clean:
	rm -rf $(BUILD)

# the version is debian/changelog's (read without dpkg-dev, which
# scripts/deb installs when missing)
DEB_VERSION = $(shell sed -n '1{s/^[^ ]* .//;s/. .*//;p;}' debian/changelog)
DEB_ARCH    = $(shell dpkg --print-architecture)
DEB         = $(BUILD)/deb/libnginx-mod-http-platform_$(DEB_VERSION)_$(DEB_ARCH).deb

.PHONY: deb

deb: $(DEB)

$(DEB): $(MODULE_SRCS) $(wildcard migrations/*.sql) scripts/migrate \
        scripts/apikey conf/platform.conf README.md docs/api.md \
        $(shell find debian -type f) scripts/deb
	scripts/deb "$(BUILD)"
