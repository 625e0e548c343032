// ftplan-gui [SCENARIO] [--zoo DIR] [--screenshot FILE.png] [--size WxH]
// The desktop planner. With --screenshot it evaluates SCENARIO, renders the window off screen
// and writes it as an image, then exits (how the docs' pictures and the GUI's test are made).
// --size opens the window at W x H pixels (default 1600x1000): a smaller screen's layout.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include <QApplication>
#include <QBuffer>
#include <QByteArray>
#include <QPixmap>
#include <QTimer>

#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "io/output_file.hpp"
#include "main_window.hpp"

#ifndef FTPLAN_ZOO_DIR
#define FTPLAN_ZOO_DIR "model_zoo"
#endif

int main(int argc, char** argv) {
  std::string scenario, screenshot, zoo_dir;
  int width = 1600, height = 1000;
  constexpr const char* kUsage = "usage: ftplan-gui [SCENARIO] [--zoo DIR] [--screenshot FILE.png] [--size WxH]";
  if (const char* env = std::getenv("FTPLAN_ZOO"); env && *env)
    zoo_dir = env;
  else
    zoo_dir = FTPLAN_ZOO_DIR;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--screenshot" || a == "--zoo") && i + 1 < argc) {
      (a == "--zoo" ? zoo_dir : screenshot) = argv[++i];
    } else if (a == "--size" && i + 1 < argc) {
      // W x H in pixels, each 320-8192: a window Qt can lay out and an image it can hold.
      const std::string v = argv[++i];
      char x = 0, rest = 0;
      if (std::sscanf(v.c_str(), "%d%c%d%c", &width, &x, &height, &rest) != 3 || (x != 'x' && x != 'X') ||
          width < 320 || height < 320 || width > 8192 || height > 8192) {
        std::cerr << "ftplan-gui: --size " << v << ": expected WxH in pixels, each 320-8192, e.g. 1280x720\n";
        return 2;
      }
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage << "\n";
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "ftplan-gui: unknown option " << a << " (" << kUsage << ")\n";
      return 2;
    } else if (scenario.empty()) {
      scenario = a;
    } else {
      std::cerr << "ftplan-gui: one scenario at a time\n";
      return 2;
    }
  }
  if (!screenshot.empty() && scenario.empty()) {
    std::cerr << "ftplan-gui: --screenshot needs a SCENARIO\n";
    return 2;
  }
  // A screenshot needs no display.
  if (!screenshot.empty() && !std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);

  QApplication app(argc, argv);
  // Where QSettings keeps the window's recent files (~/.config/ftplan/ftplan-gui.conf on Linux).
  QCoreApplication::setOrganizationName("ftplan");
  QCoreApplication::setApplicationName("ftplan-gui");
  try {
    const ftplan::model::Zoo zoo = ftplan::io::load_zoo(zoo_dir);
    const ftplan::hardware::Catalog catalog = ftplan::io::load_catalog(zoo_dir);
    ftplan::gui::MainWindow window(zoo, catalog);
    window.resize(width, height);
    // A file that cannot be read: a message, then an empty window (a screenshot has nothing to show).
    if (!scenario.empty() && !window.open_file(scenario) && !screenshot.empty()) return 1;
    if (!screenshot.empty()) {
      window.evaluate_now();
      window.show();
      QApplication::processEvents();
      // Encoded in memory, then written whole (io::write_file_atomically), like every other output.
      QByteArray png;
      QBuffer buffer(&png);
      buffer.open(QIODevice::WriteOnly);
      if (!window.grab().save(&buffer, "PNG")) {
        std::cerr << "ftplan-gui: cannot encode the screenshot\n";
        return 1;
      }
      ftplan::io::write_file_atomically(screenshot,
                                        std::string_view(png.constData(), static_cast<std::size_t>(png.size())));
      std::cout << "wrote " << screenshot << "\n";
      return 0;
    }
    window.show();
    // Without a scenario the window starts from the new-scenario form, not an empty editor.
    if (scenario.empty()) QTimer::singleShot(0, &window, &ftplan::gui::MainWindow::new_scenario_dialog);
    return app.exec();
  } catch (const std::exception& e) {
    std::cerr << "ftplan-gui: " << e.what() << "\n";
    return 1;
  }
}
