#include "run.hpp"

int main(int argc, char** argv) { return fp4sim::cli::run(argc, argv); }
