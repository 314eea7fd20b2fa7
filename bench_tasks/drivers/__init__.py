"""Client drivers: a small interface per system (STYLE 1). A driver creates what a cell needs, sends,
and delivers received messages to a callback; it never measures — timing lives in the generator."""
