# The console's browser tests (tests/e2e/test_console.py) drive Debian's Chromium with Playwright for Python
# (Playwright's own browser download is not used). `make install` installs the package when it is missing:
# as root with apt-get (a fresh Debian machine, CI), else through sudo.
CHROMIUM := /usr/bin/chromium
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get

install: $(CHROMIUM)

$(CHROMIUM):
	@command -v apt-get >/dev/null 2>&1 || { echo "install Chromium at $(CHROMIUM) (Debian package chromium)"; exit 1; }
	$(APT_GET) update -qq
	$(APT_GET) install -y -qq chromium

# Screenshots of the main pages, taken by the same tests, into docs/img (committed; the README shows them).
.PHONY: console-screenshots
console-screenshots: install
	SLUICE_CONSOLE_SCREENSHOTS=docs/img $(RUN) pytest -q -p no:cacheprovider tests/e2e/test_console.py
