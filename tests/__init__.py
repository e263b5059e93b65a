"""The pytest suite, a package so that its helpers import by one name
(``from tests.exact_float import ...``): cross-cutting tests here, a unit's and its paper's in
``tests/<paper>/`` (``kllm``, ``oaken``, ``p3``, ``accllm``, ``baselines``)."""
