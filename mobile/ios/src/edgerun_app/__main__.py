"""What Briefcase runs on the device: the Toga app showing the packed model's summary."""
from edgerun_app.app import main

main().main_loop()
