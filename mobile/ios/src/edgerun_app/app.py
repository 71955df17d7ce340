"""A one-screen Toga app: runs the packed model through edgerun and shows the summary."""
import toga
from toga.style import Pack

from edgerun_app.entry import run_packed_model


class EdgerunApp(toga.App):
    def startup(self):
        try:
            summary = run_packed_model()
        except Exception as e:  # noqa: BLE001 - show any failure on screen
            summary = f"edgerun failed: {type(e).__name__}: {e}"
        label = toga.MultilineTextInput(value=summary, readonly=True, style=Pack(flex=1))
        self.main_window = toga.MainWindow(title=self.formal_name)
        self.main_window.content = toga.Box(children=[label], style=Pack(direction="column"))
        self.main_window.show()


def main():
    return EdgerunApp("{{APP_NAME}}", "dev.edgerun.edgerun_app")
