"""The board link: a registered unit behind a UART on a real board, and the host that checks it.

==========================  ==========================================================
:mod:`.protocol`            the byte protocol's rules and both ends' pure-Python parts:
                            commands, headers and flags, the frame layout from a
                            manifest, the identity, the baud divisor, :class:`BridgeClient`
:mod:`.gateware`            the board end: :class:`UartBridge` from :class:`CommandDecoder`
                            and :class:`FrameSender` over :mod:`fpga.bridge.uart`
:mod:`.board`               board builds (amaranth-boards, YoWASP tools):
                            ``qllm bitstream``
:mod:`.host`                stream beats to a board and compare with the unit's golden
                            adapter: ``qllm host``
==========================  ==========================================================

Nothing is imported here, so that the protocol and the host do not pull in Amaranth.
"""
