// weft-doctor DIR: names the stuck or mismatched rank and operation from a job's flight recorder
// dumps. Exit status: 0 no problem found, 1 a problem found, 2 bad usage or no dump in DIR.
// docs/OBSERVABILITY.md.
#include <CLI/CLI.hpp>
#include <iostream>

#include "launcher/doctor.h"

int main(int argc, char** argv) {
  CLI::App app{"weft-doctor: reads the flight recorder dumps of a Weft job (WEFT_DUMP_DIR) and names what went wrong"};
  std::string dir;
  bool as_json = false;
  app.add_option("dir", dir, "the folder of the job's dumps (rank<R>.json)")->required();
  app.add_flag("--json", as_json, "print the findings as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    auto report = weft::launcher::diagnose_dir(dir);
    if (as_json) std::cout << weft::launcher::doctor_json(report).dump(2) << "\n";
    else std::cout << weft::launcher::doctor_text(report);
    return report.problem() ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "weft-doctor: " << e.what() << "\n";
    return 2;
  }
}
