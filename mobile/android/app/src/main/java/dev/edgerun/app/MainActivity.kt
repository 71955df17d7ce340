package dev.edgerun.app

import android.app.Activity
import android.os.Bundle
import android.widget.ScrollView
import android.widget.TextView
import com.chaquo.python.Python
import com.chaquo.python.android.AndroidPlatform

/** Starts Python, runs the packed model through edgerun off the UI thread, shows the summary. */
class MainActivity : Activity() {
    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        val text = TextView(this).apply { text = "Running {{MODEL_NAME}} with edgerun..." }
        setContentView(ScrollView(this).apply { addView(text) })
        if (!Python.isStarted()) {
            Python.start(AndroidPlatform(this))
        }
        Thread {
            val summary = try {
                Python.getInstance().getModule("edgerun_app.entry")
                    .callAttr("run_packed_model").toString()
            } catch (e: Exception) {
                "edgerun failed: ${e.message}"
            }
            runOnUiThread { text.text = summary }
        }.start()
    }
}
